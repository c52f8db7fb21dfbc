package server

import (
	"context"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestLockTimeoutIs503: a write that waits past --db-lock-timeout for its
// owner's lock (held here by a stuck transaction) is answered 503
// unavailable with Retry-After, a retryable error, not 500; other owners
// are served meanwhile.
func TestLockTimeoutIs503(t *testing.T) {
	testenv.SkipOnCitus(t, "the row lock is waited for on the worker, where the tenant role's lock_timeout applies, not the flag's (TestCitusLockTimeoutOnWorker)")
	tn := newTenant(t)
	srv := tn.serve(t, serverSetup{args: []string{"--db-lock-timeout=300ms"}})
	add := func(owner, content string) *response { return srv.addMemory(t, owner, content) }
	add("stuck", "Stuck plays the cello").want(t, 201)
	tn.holdOwnerLock(t, "stuck")
	start := time.Now()
	r := add("stuck", "Stuck also plays the viola").want(t, 503)
	if p := r.problem(t); p.Type != ProblemBase+"unavailable" || r.header.Get("Retry-After") == "" {
		t.Fatalf("problem %+v, Retry-After %q", p, r.header.Get("Retry-After"))
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("answered after %s, want about the lock timeout of 300ms", took)
	}
	add("free", "Free plays the drums").want(t, 201)
}

// holdOwnerLock takes owner's row lock in an admin transaction that stays
// open until the test ends: the service's next write for that owner waits
// for it (a stuck transaction).
func (tn *testTenant) holdOwnerLock(t *testing.T, owner string) {
	t.Helper()
	tx, err := tn.admin.Begin(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(testCtx(t), `SELECT FROM `+tn.schema+`.owner_locks WHERE owner_id = $1 FOR UPDATE`, owner); err != nil {
		t.Fatal(err)
	}
}

// addMemory posts one memory with content for owner.
func (s *testServer) addMemory(t *testing.T, owner, content string) *response {
	t.Helper()
	return s.do(t, req{method: "POST", path: memPath(owner, "memories"), body: map[string]any{"content": content}})
}
