package jobrun

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/testenv"
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
	testenv.FlagsDocumented(t, "manager job", usage.String(), 6)
}
