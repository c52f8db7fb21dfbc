package jobrun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
	"github.com/engram-dev/engram/internal/testenv/tenanttest"
	"github.com/engram-dev/engram/internal/workload"
)

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
	prov := tenanttest.Provision(t, ctx, adminURL, "engram_job", dims)
	schema := prov.Schema
	policy := memory.DefaultPolicy()
	policy.Conversation.SessionIdleTTL = memory.Duration(30 * 24 * time.Hour)
	cfg := memory.ServiceConfig{Schema: schema, Embedding: memory.EmbeddingConfig{Provider: memory.ProviderBuiltin, Dimensions: dims}, Policy: policy}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := workload.WriteServiceConfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	jt := &jobTenant{admin: admin, schema: schema, loginURL: prov.LoginURL, config: path}
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
	return runMainEnv(t, jt, nil, args...)
}

// runMainEnv is runMain with more environment variables (an S3 access key).
func runMainEnv(t *testing.T, jt *jobTenant, env map[string]string, args ...string) (int, memory.JobSummary, string) {
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
		return env[k]
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
