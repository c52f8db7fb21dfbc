package jobrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
	"github.com/engram-dev/engram/internal/workload"
)

const dims = 128

func TestParseOps(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{"decay,expire,purge,compact", []string{"decay", "expire", "purge", "compact"}, ""},
		{"compact,decay", []string{"decay", "compact"}, ""},
		{" purge , purge,expire ", []string{"expire", "purge"}, ""},
		{"decay,,", []string{"decay"}, ""},
		{"", nil, "no operation"},
		{"decay,shred", nil, `unknown operation "shred"`},
		{"Decay", nil, "unknown operation"},
	} {
		got, err := ParseOps(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseOps(%q) error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseOps(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestTruncateKeepsUTF8(t *testing.T) {
	s := strings.Repeat("é", 1000)
	got := truncate(s, 101)
	if len(got) > 101 || !strings.HasSuffix(got, "...") || !utf8Valid(got) {
		t.Fatalf("truncate = %q (%d bytes)", got, len(got))
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "?") == s }

// jobTenant is a provisioned tenant, its config file and a store on it.
type jobTenant struct {
	admin    *pgxpool.Pool
	schema   string
	loginURL string
	config   string
	store    *memory.Store
}

func newJobTenant(t *testing.T) *jobTenant {
	t.Helper()
	ctx := context.Background()
	adminURL := testenv.NewDatabase(t)
	admin := testenv.NewPool(t, adminURL, 4)
	schema := fmt.Sprintf("engram_job_%d", time.Now().UnixNano()%1e12)
	owner := tenant.Owner{UID: "test-" + schema, Namespace: "test", Name: schema}
	res, err := tenant.Provision(ctx, admin, tenant.Spec{Schema: schema, Dimensions: dims, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = tenant.Drop(context.Background(), admin, schema, owner) })
	policy := memory.DefaultPolicy()
	policy.Conversation.SessionIdleTTL = memory.Duration(30 * 24 * time.Hour)
	cfg := memory.ServiceConfig{Schema: schema, Embedding: memory.EmbeddingConfig{Provider: memory.ProviderBuiltin, Dimensions: dims}, Policy: policy}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := workload.WriteServiceConfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	jt := &jobTenant{admin: admin, schema: schema, loginURL: testenv.WithUser(adminURL, res.LoginRole, res.Password), config: path}
	loaded, err := workload.LoadServiceConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	tn, err := workload.Open(ctx, workload.StoreParams{Config: loaded, DatabaseURL: jt.loginURL, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tn.Close)
	jt.store = tn.Store
	return jt
}

func (jt *jobTenant) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := jt.admin.Exec(context.Background(), strings.ReplaceAll(sql, "$schema", jt.schema), args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (jt *jobTenant) add(t *testing.T, owner, content, category string) string {
	t.Helper()
	res, err := jt.store.Add(context.Background(), memory.AddRequest{Owner: owner, Content: content, Category: category})
	if err != nil {
		t.Fatalf("adding %q: %v", content, err)
	}
	if res.Action != memory.ActionAdded {
		t.Fatalf("adding %q: action %s, want added", content, res.Action)
	}
	return res.Memory.ID
}

// seeded are the ids of the rows each operation must change.
type seeded struct {
	decayed, expired, purgeable, copies []string
	keeper                              string
}

// seed writes rows for each operation with the engine, then moves them in
// time with SQL on the admin connection: 3 long-untouched contextual rows
// (decay forgets them), 2 past their expiry (expire), 4 inactive for 60 days
// (purge, retention 30d) and 2 exact copies of a live row (compact). The
// copies are a minute older than the original, so compaction's order (ties
// on importance go to the more recently written) keeps the original: their
// random v4 ids would otherwise win or lose the id tie-break by chance.
func seed(t *testing.T, jt *jobTenant) seeded {
	var s seeded
	for _, c := range []string{"Olga visited Reykjavik in winter", "Olga's old phone was a Nokia", "Olga once lived next to a bakery"} {
		s.decayed = append(s.decayed, jt.add(t, "olga", c, "contextual"))
	}
	for _, c := range []string{"Olga has a dentist appointment on Friday", "Olga is waiting for a parcel"} {
		s.expired = append(s.expired, jt.add(t, "olga", c, "contextual"))
	}
	for _, c := range []string{"Pavel used to drive a red car", "Pavel had a goldfish", "Pavel studied law first", "Pavel wore glasses"} {
		s.purgeable = append(s.purgeable, jt.add(t, "pavel", c, "project"))
	}
	s.keeper = jt.add(t, "olga", "Olga prefers window seats on planes", "preference")
	jt.add(t, "olga", "Olga is a structural engineer", "identity")

	jt.exec(t, `UPDATE $schema.memories SET updated_at = now() - interval '400 days', created_at = now() - interval '400 days', last_accessed_at = NULL WHERE id = ANY($1::uuid[])`, s.decayed)
	jt.exec(t, `UPDATE $schema.memories SET expires_at = now() - interval '1 day' WHERE id = ANY($1::uuid[])`, s.expired)
	jt.exec(t, `UPDATE $schema.memories SET active = false, deactivated_at = now() - interval '60 days' WHERE id = ANY($1::uuid[])`, s.purgeable)
	seedConversations(t, jt)
	for i := range 2 {
		var id string
		if err := jt.admin.QueryRow(context.Background(), strings.ReplaceAll(`INSERT INTO $schema.memories
			(id, owner_id, agent_id, session_id, source, category, content, importance, embedding, flags, active, expires_at, created_at, updated_at)
			SELECT gen_random_uuid(), owner_id, agent_id, session_id, source, category, content || $2, importance, embedding, flags, active, expires_at, created_at - interval '1 minute', updated_at - interval '1 minute'
			FROM $schema.memories WHERE id = $1 RETURNING id::text`, "$schema", jt.schema), s.keeper, fmt.Sprintf(" (copy %d)", i)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		s.copies = append(s.copies, id)
	}
	return s
}

// seedConversations writes a session due for summarizing (12 messages of
// about 325 tokens: over 0.75 × the default budget of 4000) and a session
// idle for 60 days (sessionIdleTTL 30d deletes it).
func seedConversations(t *testing.T, jt *jobTenant) {
	t.Helper()
	ctx := context.Background()
	for _, id := range []string{"long-chat", "idle-chat"} {
		if _, err := jt.store.CreateSession(ctx, memory.CreateSessionRequest{Owner: "olga", ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		_, err := jt.store.AppendTurn(ctx, memory.AppendRequest{Owner: "olga", SessionID: "long-chat", Messages: []memory.TurnMessage{
			{Role: memory.RoleUser, Content: fmt.Sprintf("Question %d. %s", i, strings.Repeat("Tell me about bridges. ", 56))},
			{Role: memory.RoleAssistant, Content: fmt.Sprintf("Answer %d. %s", i, strings.Repeat("Bridges carry loads. ", 62))},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := jt.store.AppendTurn(ctx, memory.AppendRequest{Owner: "olga", SessionID: "idle-chat",
		Messages: []memory.TurnMessage{{Role: memory.RoleUser, Content: "hello"}}}); err != nil {
		t.Fatal(err)
	}
	jt.exec(t, `UPDATE $schema.sessions SET last_active_at = now() - interval '60 days' WHERE id = 'idle-chat'`)
}

// dump is every row of the tenant (embedding left out), for before/after.
func dump(t *testing.T, jt *jobTenant) string {
	t.Helper()
	var out string
	err := jt.admin.QueryRow(context.Background(), strings.ReplaceAll(`SELECT coalesce((SELECT jsonb_agg(to_jsonb(m) - 'embedding' ORDER BY id) FROM $schema.memories m), '[]')::text
		|| coalesce((SELECT jsonb_agg(to_jsonb(h) ORDER BY id) FROM $schema.memory_history h), '[]')::text
		|| coalesce((SELECT jsonb_agg(to_jsonb(c) ORDER BY owner_id, id) FROM $schema.sessions c), '[]')::text
		|| (SELECT count(*) FROM $schema.messages)::text || '/' || (SELECT count(*) FROM $schema.summaries)::text`, "$schema", jt.schema)).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runMain runs `manager job` in-process and returns its exit code, the
// summary it printed and the termination-message file's content.
func runMain(t *testing.T, jt *jobTenant, args ...string) (int, memory.JobSummary, string) {
	t.Helper()
	term := filepath.Join(t.TempDir(), "termination-log")
	args = append([]string{"--config=" + jt.config, "--termination-log=" + term, "--log-format=text"}, args...)
	var stdout, stderr bytes.Buffer
	// Bounded, so a run that deadlocks fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := Main(ctx, args, func(k string) string {
		if k == naming.EnvDatabaseURL {
			return jt.loginURL
		}
		return ""
	}, &stdout, &stderr)
	var sum memory.JobSummary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not one JSON summary: %v\n%s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if strings.Count(strings.TrimSpace(stdout.String()), "\n") != 0 {
		t.Fatalf("stdout has more than one line:\n%s", stdout.String())
	}
	termination, err := os.ReadFile(term)
	if err != nil {
		t.Fatalf("termination log not written: %v", err)
	}
	if strings.TrimSpace(string(termination)) != strings.TrimSpace(stdout.String()) {
		t.Fatalf("termination log %s differs from stdout %s", termination, stdout.String())
	}
	if len(termination) > 4096 {
		t.Fatalf("termination message is %d bytes, over the kubelet's 4 KiB", len(termination))
	}
	if t.Failed() {
		t.Logf("stderr:\n%s", stderr.String())
	}
	return code, sum, string(termination)
}

func affected(sum memory.JobSummary) map[string]int64 {
	out := map[string]int64{}
	for _, op := range sum.Operations {
		out[op.Name] = op.Affected
	}
	return out
}

// TestJob seeds rows for every operation, checks that a dry run counts them
// and changes nothing, that a real run's counts match the seed and the rows
// changed as they should, that a second run finds nothing left, and that the
// summary is on stdout and in the termination-message file.
func TestJob(t *testing.T) {
	jt := newJobTenant(t)
	s := seed(t, jt)
	want := map[string]int64{"decay": 3, "expire": 2, "purge": 4, "compact": 2, "summarize": 1, "sessions": 1}
	ctx := context.Background()

	before := dump(t, jt)
	code, sum, _ := runMain(t, jt, "--dry-run", "--ops=sessions,compact,summarize,purge,expire,decay")
	if code != 0 || sum.Result != memory.RunSucceeded || !sum.DryRun || sum.Schema != jt.schema {
		t.Fatalf("dry run: exit %d, %+v", code, sum)
	}
	if got := affected(sum); !reflect.DeepEqual(got, want) {
		t.Fatalf("dry-run counts %v, want %v", got, want)
	}
	if after := dump(t, jt); after != before {
		t.Fatalf("the dry run changed the data:\nbefore %s\nafter  %s", before, after)
	}

	code, sum, _ = runMain(t, jt, "--ops=decay,expire,purge,compact,summarize,sessions", "--batch-size=2")
	if code != 0 || sum.Result != memory.RunSucceeded || sum.DryRun || sum.Message != "" {
		t.Fatalf("run: exit %d, %+v", code, sum)
	}
	var order []string
	for _, op := range sum.Operations {
		order = append(order, op.Name)
		if op.Batches < 1 || op.DurationMillis < 0 {
			t.Errorf("operation %+v", op)
		}
	}
	if !reflect.DeepEqual(order, memory.Operations) {
		t.Fatalf("operations ran in order %v, want %v", order, memory.Operations)
	}
	if got := affected(sum); !reflect.DeepEqual(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	if sum.StartTime.IsZero() || sum.CompletionTime.Before(sum.StartTime) {
		t.Fatalf("times %v .. %v", sum.StartTime, sum.CompletionTime)
	}

	var inactive, purgedLeft, superseded int
	q := func(sql string, dst *int, args ...any) {
		t.Helper()
		if err := jt.admin.QueryRow(ctx, strings.ReplaceAll(sql, "$schema", jt.schema), args...).Scan(dst); err != nil {
			t.Fatal(err)
		}
	}
	q(`SELECT count(*) FROM $schema.memories WHERE NOT active AND id = ANY($1::uuid[])`, &inactive, append(append([]string{}, s.decayed...), s.expired...))
	q(`SELECT count(*) FROM $schema.memories WHERE id = ANY($1::uuid[])`, &purgedLeft, s.purgeable)
	q(`SELECT count(*) FROM $schema.memories WHERE NOT active AND superseded_by = $2 AND id = ANY($1::uuid[])`, &superseded, s.copies, s.keeper)
	if inactive != 5 || purgedLeft != 0 || superseded != 2 {
		t.Fatalf("after the run: %d of 5 decayed+expired inactive, %d of 4 purgeable left, %d of 2 copies superseded", inactive, purgedLeft, superseded)
	}
	var keeperActive bool
	if err := jt.admin.QueryRow(ctx, `SELECT active FROM `+jt.schema+`.memories WHERE id = $1`, s.keeper).Scan(&keeperActive); err != nil || !keeperActive {
		t.Fatalf("the keeper of the duplicates is not active (%v)", err)
	}

	code, sum, _ = runMain(t, jt)
	if code != 0 || sum.Result != memory.RunSucceeded {
		t.Fatalf("second run: exit %d %+v", code, sum)
	}
	for op, n := range affected(sum) {
		if n != 0 {
			t.Errorf("second run: %s affected %d, want 0", op, n)
		}
	}
}

// TestJobSkipsWhenLocked: while another run holds the tenant's maintenance
// lock, `manager job` exits 0 with result Skipped, "skipped: locked", and
// changes nothing.
func TestJobSkipsWhenLocked(t *testing.T) {
	jt := newJobTenant(t)
	seed(t, jt)
	before := dump(t, jt)
	holding, release := make(chan struct{}), make(chan struct{})
	lockErr := make(chan error, 1)
	go func() {
		lockErr <- jt.store.WithJobLock(context.Background(), func(context.Context) error {
			close(holding)
			<-release
			return nil
		})
	}()
	select {
	case <-holding:
	case err := <-lockErr:
		t.Fatalf("taking the lock: %v", err)
	}
	code, sum, term := runMain(t, jt)
	close(release)
	if err := <-lockErr; err != nil {
		t.Fatal(err)
	}
	if code != 0 || sum.Result != memory.RunSkipped || sum.Message != MessageSkippedLocked || len(sum.Operations) != 0 {
		t.Fatalf("while locked: exit %d, %+v", code, sum)
	}
	if !strings.Contains(term, `"result":"Skipped"`) {
		t.Fatalf("termination log %s", term)
	}
	if dump(t, jt) != before {
		t.Fatal("a skipped run changed data")
	}
	// Released: the next run works.
	if code, sum, _ := runMain(t, jt, "--ops=expire"); code != 0 || sum.Result != memory.RunSucceeded {
		t.Fatalf("after release: exit %d %+v", code, sum)
	}
}

// TestJobOneConnection: a run with a pool of one connection finishes (the
// maintenance lease holds no connection for the run).
func TestJobOneConnection(t *testing.T) {
	jt := newJobTenant(t)
	seed(t, jt)
	code, sum, _ := runMain(t, jt, "--db-max-conns=1", "--batch-size=1", "--ops=decay,expire,purge,compact,summarize,sessions")
	want := map[string]int64{"decay": 3, "expire": 2, "purge": 4, "compact": 2, "summarize": 1, "sessions": 1}
	if code != 0 || sum.Result != memory.RunSucceeded || !reflect.DeepEqual(affected(sum), want) {
		t.Fatalf("--db-max-conns=1: exit %d, %+v; want success with %v", code, sum, want)
	}
}

// slowStore is the real store whose operations take a little longer, so
// two runs started together surely overlap.
type slowStore struct{ *memory.Store }

func (s slowStore) RunJob(ctx context.Context, op string, opts memory.JobOptions) (*memory.JobResult, error) {
	time.Sleep(200 * time.Millisecond)
	return s.Store.RunJob(ctx, op, opts)
}

// TestConcurrentRunsOneSkips: of two runs of one tenant started together,
// exactly one maintains it and the other reports Skipped.
func TestConcurrentRunsOneSkips(t *testing.T) {
	jt := newJobTenant(t)
	seed(t, jt)
	sums := make(chan memory.JobSummary, 2)
	start := make(chan struct{})
	for range 2 {
		go func() {
			<-start
			sums <- Run(context.Background(), slowStore{jt.store}, jt.schema, memory.Operations, memory.JobOptions{})
		}()
	}
	close(start)
	results := map[string]int{}
	for range 2 {
		sum := <-sums
		results[sum.Result]++
		if sum.Result == memory.RunSkipped && (sum.Message != MessageSkippedLocked || len(sum.Operations) != 0) {
			t.Errorf("skipped run: %+v", sum)
		}
	}
	if results[memory.RunSucceeded] != 1 || results[memory.RunSkipped] != 1 {
		t.Fatalf("two concurrent runs ended %v, want one Succeeded and one Skipped", results)
	}
}

// TestJobLeaseTakeover: the lease of a run that was killed (never released)
// makes the next runs skip until it expires; then a run takes it over and
// gives it back at its end.
func TestJobLeaseTakeover(t *testing.T) {
	jt := newJobTenant(t)
	jt.exec(t, `UPDATE $schema.job_locks SET holder = 'killed-run', expires_at = now() + interval '1 hour'`)
	if code, sum, _ := runMain(t, jt); code != 0 || sum.Result != memory.RunSkipped || sum.Message != MessageSkippedLocked {
		t.Fatalf("under a live lease: exit %d, %+v; want Skipped", code, sum)
	}
	jt.exec(t, `UPDATE $schema.job_locks SET expires_at = now() - interval '1 second'`)
	if code, sum, _ := runMain(t, jt); code != 0 || sum.Result != memory.RunSucceeded {
		t.Fatalf("over an expired lease: exit %d, %+v; want Succeeded", code, sum)
	}
	var holder *string
	if err := jt.admin.QueryRow(context.Background(), `SELECT holder FROM `+jt.schema+`.job_locks WHERE name = 'maintenance'`).Scan(&holder); err != nil || holder != nil {
		t.Fatalf("lease after the run: holder %v (%v), want released", holder, err)
	}
}

// TestJobLockTimeout: --db-lock-timeout reaches the job's sessions: with
// the lease row locked by a stuck transaction, the run fails after about
// the timeout with a message saying so, instead of waiting for good.
func TestJobLockTimeout(t *testing.T) {
	jt := newJobTenant(t)
	tx, err := jt.admin.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(context.Background(), `SELECT FROM `+jt.schema+`.job_locks FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, sum, _ := runMain(t, jt, "--db-lock-timeout=200ms")
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the run waited %s for a lock, want about 200ms", took)
	}
	if code != 1 || sum.Result != memory.RunFailed || !strings.Contains(sum.Message, "lock timeout") {
		t.Fatalf("behind a stuck lock: exit %d, %+v; want Failed naming the lock timeout", code, sum)
	}
}

// TestJobFailures: every failure is a Failed summary with the reason, exit
// non-zero, and the termination message written.
func TestJobFailures(t *testing.T) {
	jt := newJobTenant(t)

	code, sum, _ := runMain(t, jt, "--ops=decay,shred")
	if code != 1 || sum.Result != memory.RunFailed || !strings.Contains(sum.Message, `"shred"`) {
		t.Fatalf("unknown op: exit %d %+v", code, sum)
	}

	// A schema that does not exist: the first operation fails.
	missing := strings.Replace(mustRead(t, jt.config), jt.schema, "engram_missing_schema", 1)
	jt.config = filepath.Join(t.TempDir(), "missing.yaml")
	if err := os.WriteFile(jt.config, []byte(missing), 0o600); err != nil {
		t.Fatal(err)
	}
	code, sum, _ = runMain(t, jt)
	if code != 1 || sum.Result != memory.RunFailed || !strings.Contains(sum.Message, "does not exist") || sum.Schema != "engram_missing_schema" {
		t.Fatalf("missing schema: exit %d %+v", code, sum)
	}

	jt.config = filepath.Join(t.TempDir(), "nope.yaml")
	code, sum, _ = runMain(t, jt)
	if code != 1 || sum.Result != memory.RunFailed || !strings.Contains(sum.Message, "config") {
		t.Fatalf("missing config: exit %d %+v", code, sum)
	}

	code, sum, _ = runMain(t, jt, "--batch-size=0")
	if code != 2 || sum.Result != memory.RunFailed || !strings.Contains(sum.Message, "batch-size") {
		t.Fatalf("bad flag: exit %d %+v", code, sum)
	}
	code, sum, _ = runMain(t, jt, "--compact-owner-budget=0s")
	if code != 2 || sum.Result != memory.RunFailed || !strings.Contains(sum.Message, "compact-owner-budget") {
		t.Fatalf("no compaction budget: exit %d %+v", code, sum)
	}
	code, sum, _ = runMain(t, jt, "--db-statement-timeout=0")
	if code != 2 || sum.Result != memory.RunFailed || !strings.Contains(sum.Message, "statement-timeout") {
		t.Fatalf("no statement timeout: exit %d %+v", code, sum)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestJobFlagsDocumented fails when a flag of `manager job` is missing from
// docs/configuration.md.
func TestJobFlagsDocumented(t *testing.T) {
	var usage bytes.Buffer
	if _, err := ParseFlags([]string{"-h"}, func(string) string { return "" }, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	flags := regexp.MustCompile(`(?m)^\s+-([a-z-]+)`).FindAllStringSubmatch(usage.String(), -1)
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(flags) < 6 {
		t.Fatalf("found %d flags in:\n%s", len(flags), usage.String())
	}
	for _, f := range flags {
		if !strings.Contains(string(doc), "`--"+f[1]) {
			t.Errorf("docs/configuration.md does not document --%s of manager job", f[1])
		}
	}
}
