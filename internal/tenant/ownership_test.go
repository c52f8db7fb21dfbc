package tenant

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// comments returns the ownership comments of a schema and its two roles.
func comments(t *testing.T, pool *pgxpool.Pool, schema string) [3]string {
	t.Helper()
	var out [3]string
	err := pool.QueryRow(testCtx(t), `SELECT
		coalesce((SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = $1), ''),
		coalesce((SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $2), ''),
		coalesce((SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $3), '')`,
		schema, OwnerRole(schema), LoginRole(schema)).Scan(&out[0], &out[1], &out[2])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTakeoverIsRefused is the attack of issue 12: a second runtime naming
// the first one's schema is refused, and the victim's password, data and
// markers are untouched; its rotate and drop are refused too.
func TestTakeoverIsRefused(t *testing.T) {
	pool, url := adminPool(t)
	ctx := testCtx(t)
	victim := newSpec(uniqueSchema(t, "engram_victim"), 3)
	victim.Owner = Owner{UID: "uid-victim", Namespace: "pa", Name: "x-bot"}
	res := mustProvision(t, pool, url, victim)
	conn := loginConn(t, url, res, res.Password)
	if _, err := conn.Exec(ctx, `INSERT INTO memories (id, owner_id, source, category, content, embedding)
		VALUES ('00000000-0000-7000-8000-000000000001', 'alice', 'user', 'c', 'secret plans', '[1,0,0]')`); err != nil {
		t.Fatal(err)
	}
	before := comments(t, pool, victim.Schema)

	thief := victim
	thief.Owner = Owner{UID: "uid-thief", Namespace: "pm", Name: "thief"}
	for _, claim := range []Claim{{}, {LegacySchema: true}, {AdoptFromUID: "uid-victim"}} {
		thief.Claim = claim
		got, err := Provision(ctx, pool, thief)
		if !errors.Is(err, ErrOwnedByOther) {
			t.Fatalf("Provision by another runtime (claim %+v) = %+v, %v; want ErrOwnedByOther", claim, got, err)
		}
		if !strings.Contains(err.Error(), "pa/x-bot") {
			t.Errorf("the refusal does not say which runtime owns the schema: %v", err)
		}
	}
	if _, err := RotatePassword(ctx, pool, victim.Schema, thief.Owner); !errors.Is(err, ErrOwnedByOther) {
		t.Fatalf("RotatePassword by another runtime: %v; want ErrOwnedByOther", err)
	}
	if _, err := Drop(ctx, pool, victim.Schema, thief.Owner); !errors.Is(err, ErrOwnedByOther) {
		t.Fatalf("Drop by another runtime: %v; want ErrOwnedByOther", err)
	}
	if after := comments(t, pool, victim.Schema); after != before {
		t.Fatalf("markers changed by refused calls:\nbefore %q\nafter  %q", before, after)
	}
	var content string
	if err := loginConn(t, url, res, res.Password).QueryRow(ctx, `SELECT content FROM memories`).Scan(&content); err != nil || content != "secret plans" {
		t.Fatalf("the victim's password or data did not survive: %q, %v", content, err)
	}
	if !strings.Contains(before[0], "uid=uid-victim") || !strings.Contains(before[0], "runtime=pa/x-bot") ||
		!strings.Contains(before[2], "uid=uid-victim") {
		t.Fatalf("markers do not record the owner's UID and runtime: %q", before)
	}
}

// TestLegacyMarkerUpgrade: a schema of an earlier release (marker without a
// UID) is re-marked once by the runtime whose status records it and whose
// name its comment carries; nobody else may take it.
func TestLegacyMarkerUpgrade(t *testing.T) {
	pool, url := adminPool(t)
	ctx := testCtx(t)
	spec := newSpec(uniqueSchema(t, "engram_legacy"), 3)
	spec.Owner = Owner{UID: "uid-new", Namespace: "pa", Name: "x-bot"}
	res := mustProvision(t, pool, url, spec)
	// Turn the markers into those of the earlier release.
	for _, stmt := range []string{
		"COMMENT ON SCHEMA " + pgx.Identifier{spec.Schema}.Sanitize() + " IS 'managed-by=engram; tenant=pa/x-bot'",
		"COMMENT ON ROLE " + pgx.Identifier{res.OwnerRole}.Sanitize() + " IS 'managed-by=engram'",
		"COMMENT ON ROLE " + pgx.Identifier{res.LoginRole}.Sanitize() + " IS 'managed-by=engram'",
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	other := spec
	other.Owner, other.Claim = Owner{UID: "uid-thief", Namespace: "pa-x", Name: "bot"}, Claim{LegacySchema: true}
	if _, err := Provision(ctx, pool, other); !errors.Is(err, ErrOwnedByOther) {
		t.Fatalf("another runtime claiming a legacy schema: %v; want ErrOwnedByOther", err)
	}
	if _, err := Provision(ctx, pool, spec); !errors.Is(err, ErrOwnedByOther) {
		t.Fatalf("the right runtime without its status record: %v; want ErrOwnedByOther", err)
	}
	spec.Claim = Claim{LegacySchema: true}
	got, err := Provision(ctx, pool, spec)
	if err != nil {
		t.Fatal(err)
	}
	if got.Password != "" || len(got.Changes) != 3 {
		t.Fatalf("upgrade changes %v (password returned %v); want the three markers rewritten only", got.Changes, got.Password != "")
	}
	for _, c := range comments(t, pool, spec.Schema) {
		if !strings.Contains(c, "uid=uid-new") {
			t.Fatalf("not re-marked: %q", c)
		}
	}
	loginConn(t, url, res, res.Password) // the password is unchanged
}

// TestAdoptAfterRestore: a runtime recreated under the same namespace and
// name (new UID) takes the schema only with the annotation naming the old
// UID; the same annotation does nothing for another runtime.
func TestAdoptAfterRestore(t *testing.T) {
	pool, url := adminPool(t)
	ctx := testCtx(t)
	old := newSpec(uniqueSchema(t, "engram_dr"), 3)
	old.Owner = Owner{UID: "uid-before", Namespace: "team", Name: "bot"}
	res := mustProvision(t, pool, url, old)

	restored := old
	restored.Owner.UID = "uid-after"
	_, err := Provision(ctx, pool, restored)
	if !errors.Is(err, ErrOwnedByOther) || !strings.Contains(err.Error(), naming.AnnotationAdoptFromUID+"=uid-before") {
		t.Fatalf("recreated runtime without the annotation: %v; want a refusal that names the annotation", err)
	}
	elsewhere := restored
	elsewhere.Owner = Owner{UID: "uid-x", Namespace: "other", Name: "bot"}
	elsewhere.Claim = Claim{AdoptFromUID: "uid-before"}
	if _, err := Provision(ctx, pool, elsewhere); !errors.Is(err, ErrOwnedByOther) {
		t.Fatalf("another namespace adopting with the right UID: %v; want ErrOwnedByOther", err)
	}
	restored.Claim = Claim{AdoptFromUID: "uid-before"}
	if _, err := Provision(ctx, pool, restored); err != nil {
		t.Fatalf("adoption: %v", err)
	}
	if _, err := Drop(ctx, pool, old.Schema, old.Owner); !errors.Is(err, ErrOwnedByOther) {
		t.Fatalf("the old UID may still drop the adopted schema: %v", err)
	}
	loginConn(t, url, res, res.Password)
	restored.Claim = Claim{}
	if again, err := Provision(ctx, pool, restored); err != nil || again.Changed() {
		t.Fatalf("after adoption, a plain reconcile = %+v, %v; want no change", again, err)
	}
}

// TestTenantLocksCannotStallProvisioning: tenant A's login role holds
// every lock it can take and a snapshot, and B's provisioning (replayed
// as an upgrade would: migrations 7, 10 and 12 build indexes
// concurrently) and drop complete anyway; a new tenant C, installed in
// one step, does not even wait for the snapshot. The operator runs as a non-superuser admin, as it does
// in production, in a database where advisory locks are trapped:
//
//   - Advisory locks: A may take any key (it holds those of the earlier
//     release and (0,0)), everyone else none (testenv.ArmAdvisoryTrap). Had
//     provisioning or drop taken any advisory lock, whatever its key, it
//     would fail with "permission denied": the test does not depend on
//     guessing the key, and fails the day one is used again.
//   - The lease table: A's role is refused on it (42501).
//   - The snapshot: A's second session holds one forever; the operator
//     ends that session (it blocks a concurrent index build for longer than
//     the maximum age) and only that one: the session holding the advisory
//     locks blocks nothing and survives.
func TestTenantLocksCannotStallProvisioning(t *testing.T) {
	pool, url, superURL := restrictedAdmin(t, true)
	ctx := testCtx(t)
	testenv.ArmAdvisoryTrap(t, superURL)
	a := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_lock_a"), 3))
	b := newSpec(uniqueSchema(t, "engram_lock_b"), 3)
	dropRolesAfter(t, superURL, a.Schema)
	dropRolesAfter(t, superURL, b.Schema)
	testenv.ArmAdvisoryTrap(t, superURL, a.LoginRole)
	if err := testenv.AdvisoryTrapped(url); err != nil {
		t.Fatalf("the operator's admin role: %v", err)
	}

	connA := loginConn(t, url, a, a.Password)
	for _, name := range []string{b.Schema, a.Schema} {
		if _, err := connA.Exec(ctx, `SELECT pg_advisory_lock(hashtext('engram:provision'), hashtext($1)), pg_advisory_lock(0, 0)`, name); err != nil {
			t.Fatalf("tenant A taking advisory locks: %v", err)
		}
	}
	_, err := connA.Exec(ctx, "UPDATE "+locksTable()+" SET holder = 'tenant-a', expires_at = now() + interval '1 day'")
	if code := pgCode(err); code != "42501" {
		t.Fatalf("a tenant's login role could touch the operator's lock table: %v", err)
	}
	snap := testenv.HoldSnapshot(t, testenv.WithUser(url, a.LoginRole, a.Password), "SELECT count(*) FROM memories")

	var log blockerLog
	// A new tenant is installed in one transaction (install.go) whose
	// index builds are not concurrent: it waits for no snapshot at all.
	c := newSpec(uniqueSchema(t, "engram_lock_c"), 3)
	dropRolesAfter(t, superURL, c.Schema)
	c.Blockers = log.policy(2 * time.Second)
	mustProvision(t, pool, url, c)
	if got, ok := log.find(snap.PID); ok && got.Ended {
		t.Fatalf("a new tenant's install ended A's snapshot: %s", log.String())
	}
	// B replays the migrations, as an upgrade does: 7, 10 and 12 build
	// indexes concurrently and wait for A's snapshot.
	b.Replay = true
	b.Blockers = log.policy(2 * time.Second)
	b.IndexTimeout = time.Minute // without the watcher: fails here
	mustProvision(t, pool, url, b)
	if _, err := Drop(ctx, pool, b.Schema, b.Owner); err != nil {
		t.Fatalf("dropping B while A holds its locks: %v", err)
	}
	if got, ok := log.find(snap.PID); !ok || !got.Ended {
		t.Fatalf("A's snapshot was not ended: %s", log.String())
	}
	var held int
	if err := connA.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()`).Scan(&held); err != nil || held != 3 {
		t.Fatalf("A's session with the advisory locks (which blocked nothing) holds %d of its 3 locks: %v", held, err)
	}
}

// TestProvisionLockTimesOut: a provisioning that waits on another
// operator's live lease gives up with a clear error instead of hanging; the
// lease of a holder whose session ended (operator killed) is taken over at
// once, and an expired lease too.
func TestProvisionLockTimesOut(t *testing.T) {
	pool, url := adminPool(t)
	ctx := testCtx(t)
	spec := newSpec(uniqueSchema(t, "engram_lockwait"), 3)
	mustProvision(t, pool, url, spec)
	// Another operator's live lease: its session (this connection) is alive.
	other, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if _, err := other.Exec(ctx, "UPDATE "+locksTable()+` SET holder = 'other-operator', expires_at = now() + interval '1 hour',
		holder_pid = pg_backend_pid(), holder_started = (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())
		WHERE schema_name = $1`, spec.Schema); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Provision(ctx, pool, spec)
	if err == nil || !strings.Contains(err.Error(), "another operator") {
		t.Fatalf("Provision while the lock is held: %v; want a lock timeout", err)
	}
	if d := time.Since(start); d > lockWait+5*time.Second {
		t.Fatalf("waited %s for the lock", d)
	}
	// The holder dies (kill -9 of its operator closes its session): its
	// lease, an hour from expiry, is taken over at once.
	_ = other.Conn().Close(ctx)
	start = time.Now()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var alive bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity a JOIN `+locksTable()+` l
			ON a.pid = l.holder_pid AND a.backend_start = l.holder_started WHERE l.schema_name = $1)`, spec.Schema).Scan(&alive); err != nil {
			t.Fatal(err)
		}
		if !alive || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := Provision(ctx, pool, spec); err != nil {
		t.Fatalf("Provision after the holder's session ended: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took over a dead holder's lease after %s", d)
	}
	// An expired lease is taken over too.
	if _, err := pool.Exec(ctx, "UPDATE "+locksTable()+" SET holder = 'gone', expires_at = now() - interval '1 second', holder_pid = pg_backend_pid() WHERE schema_name = $1", spec.Schema); err != nil {
		t.Fatal(err)
	}
	if _, err := Provision(ctx, pool, spec); err != nil {
		t.Fatalf("Provision after the lease expired: %v", err)
	}
}
