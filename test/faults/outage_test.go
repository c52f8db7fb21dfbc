package faults

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestOutageAnswers503: requests caught by the outage while their
// statements wait for a lock — the moment a backend exits without a word
// when the postmaster is killed, so pgx returns a bare "unexpected EOF" —
// answer 503 problem+json with Retry-After, and the same requests pass
// once PostgreSQL is back. An add (pipelined BEGIN, owner lock, lookup)
// and an update (a row lock) wait for locks an admin session holds; then
// PostgreSQL is stopped cleanly or killed. Before the fix the add of the
// kill answered 500 problems/internal, as the fault suite once saw under
// load (issue 26).
func TestOutageAnswers503(t *testing.T) {
	bin := buildManager(t)
	in := testenv.NewInstance(t, "faults")
	adminURL := in.Start(t)
	for _, fault := range serverFaults {
		t.Run(fault.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			schema, login := provision(t, ctx, adminURL, "engram_outage")
			svc := startService(t, bin, login, schema)

			seed := svc.call(ctx, "POST", "/v1/owners/waiter/memories", map[string]any{"content": randomSentence(), "source": "user"})
			var added struct {
				Memory struct{ ID string } `json:"memory"`
			}
			if seed.status != http.StatusCreated || json.Unmarshal(seed.body, &added) != nil {
				t.Fatalf("seeding: %d %s", seed.status, seed.body)
			}
			holdLocks(ctx, t, adminURL, schema, "waiter", added.Memory.ID)
			calls := map[string]func() outcome{
				"add": func() outcome {
					return svc.call(ctx, "POST", "/v1/owners/waiter/memories", map[string]any{"content": randomSentence(), "source": "user"})
				},
				"update": func() outcome {
					return svc.call(ctx, "PATCH", "/v1/owners/waiter/memories/"+added.Memory.ID, map[string]any{"importance": 7, "source": "user"})
				},
			}
			answers := map[string]chan outcome{}
			for name, call := range calls {
				answer := make(chan outcome, 1)
				answers[name] = answer
				go func() { answer <- call() }()
			}
			waitForLockWaiters(ctx, t, adminURL, len(calls))
			in.Fault(t, fault.action)
			for name, ch := range answers {
				o := <-ch
				if o.err == nil && o.status/100 == 2 {
					// The admin session's locks went with it, and the request
					// finished before the fault reached its backend: rare, and
					// as good an answer as 503.
					t.Logf("%s caught by the %s: %d, it finished first", name, fault.name, o.status)
					continue
				}
				if o.err != nil || o.status != http.StatusServiceUnavailable || !strings.HasSuffix(o.problem, "/unavailable") || o.retryAfter == "" {
					t.Errorf("%s caught by the %s: status %d problem %q Retry-After %q error %v body %s, want a 503 problem with Retry-After\nservice log of request %s:\n%s",
						name, fault.name, o.status, o.problem, o.retryAfter, o.err, o.body, o.requestID, svc.logs.linesOf(o.requestID))
				}
			}
			in.Start(t)
			svc.waitReady(t, 60*time.Second)
			for name, call := range calls {
				if o := call(); o.status/100 != 2 {
					t.Errorf("%s after the recovery: %d %s\nservice log of request %s:\n%s", name, o.status, o.body, o.requestID, svc.logs.linesOf(o.requestID))
				}
			}
		})
	}
}

// holdLocks opens an admin transaction that locks owner's lock row and the
// memory id, so the service's add and update of owner wait. The fault ends
// the transaction.
func holdLocks(ctx context.Context, t *testing.T, adminURL, schema, owner, id string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, st := range []struct {
		sql string
		arg []any
	}{
		{"BEGIN", nil},
		{`SELECT 1 FROM ` + pgx.Identifier{schema, "owner_locks"}.Sanitize() + ` WHERE owner_id = $1 FOR UPDATE`, []any{owner}},
		{`SELECT 1 FROM ` + pgx.Identifier{schema, "memories"}.Sanitize() + ` WHERE id = $1 FOR UPDATE`, []any{id}},
	} {
		if _, err := conn.Exec(ctx, st.sql, st.arg...); err != nil {
			t.Fatalf("%s: %v", st.sql, err)
		}
	}
}

// waitForLockWaiters waits until n backends wait for a lock.
func waitForLockWaiters(ctx context.Context, t *testing.T, adminURL string, n int) {
	t.Helper()
	waitForBackends(ctx, t, adminURL, n, "request(s) waiting for a lock", `wait_event_type = 'Lock'`)
}

// waitForBackends waits, 30 s at the most, until at least n rows of
// pg_stat_activity match where (with args); what names them in the failure.
func waitForBackends(ctx context.Context, t *testing.T, adminURL string, n int, what, where string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var found int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE `+where, args...).Scan(&found); err != nil {
			t.Fatal(err)
		}
		if found >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d %s after 30 s", found, n, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
