package tenant

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestRelocateIncrementalCatchUp pins the passes after the first, which
// scan only rows newer than the previous pass's snapshot horizon and find
// deletes by counting: a key deleted and inserted again (same count), a
// key deleted while another is inserted (same count on the source, one
// more in the map), and a row updated in a transaction that was open
// across a pass boundary (its xid is before the next horizon but after
// the previous one) all reach the target; Verify agrees after each pass.
func TestRelocateIncrementalCatchUp(t *testing.T) {
	e := newCopiedMove(t, 40)
	ctx, s, rel := testCtx(t), e.spec.Schema, e.rel
	if _, err := rel.CatchUp(ctx); err != nil { // the first pass lists every key
		t.Fatalf("CatchUp 1: %v", err)
	}
	verify := func(step string) {
		t.Helper()
		if _, err := rel.Verify(ctx); err != nil {
			t.Fatalf("Verify after %s: %v", step, err)
		}
	}
	verify("the first pass")
	if n := scalar[int64](t, e.dst, "SELECT count(*) FROM "+relocTable("relocate_state")+" WHERE schema_name = $1 AND kind = 'horizon'", s); n < 15 {
		t.Fatalf("%d tables have a horizon after the first pass; want every table (the next passes scan from it)", n)
	}
	content := func() string {
		return scalar[string](t, e.dst, "SELECT content FROM "+s+".documents WHERE owner_id = 'o1' AND kind = 'profile'")
	}

	// Delete then insert again one key, in one transaction: counts equal.
	mustExec(t, e.src, strings.NewReplacer("S.", s+".").Replace(`BEGIN;
		DELETE FROM S.documents WHERE owner_id = 'o1' AND kind = 'profile';
		INSERT INTO S.documents (owner_id, kind, version, content, source) VALUES ('o1', 'profile', 3, 'likes water', 'user');
		COMMIT;`))
	if d, err := rel.CatchUp(ctx); err != nil || d != 1 {
		t.Fatalf("CatchUp after a delete and re-insert: %d rows, %v; want 1", d, err)
	}
	if c := content(); c != "likes water" {
		t.Fatalf("target document %q; want the re-inserted one", c)
	}
	verify("a delete and re-insert")

	// Delete a key in one pass, insert it again in the next.
	mustExec(t, e.src, "DELETE FROM "+s+".documents WHERE owner_id = 'o1' AND kind = 'profile'")
	if d, err := rel.CatchUp(ctx); err != nil || d != 1 {
		t.Fatalf("CatchUp after a delete: %d rows, %v; want 1", d, err)
	}
	verify("a delete")
	mustExec(t, e.src, "INSERT INTO "+s+".documents (owner_id, kind, version, content, source) VALUES ('o1', 'profile', 4, 'likes juice', 'user')")
	if d, err := rel.CatchUp(ctx); err != nil || d != 1 {
		t.Fatalf("CatchUp after the re-insert: %d rows, %v; want 1", d, err)
	}
	if c := content(); c != "likes juice" {
		t.Fatalf("target document %q; want the re-inserted one", c)
	}

	// One key gone, another new, in one transaction: the source's count
	// does not change, the map's is one more: the pass lists every key.
	mustExec(t, e.src, strings.NewReplacer("S.", s+".").Replace(`BEGIN;
		DELETE FROM S.documents WHERE owner_id = 'o1' AND kind = 'profile';
		INSERT INTO S.documents (owner_id, kind, version, content, source) VALUES ('o2', 'constraints', 1, 'no spam', 'user');
		COMMIT;`))
	if d, err := rel.CatchUp(ctx); err != nil || d != 2 {
		t.Fatalf("CatchUp after a delete and another insert: %d rows, %v; want 2", d, err)
	}
	if n := scalar[int64](t, e.dst, "SELECT count(*) FROM "+s+".documents WHERE owner_id = 'o1'"); n != 0 {
		t.Fatalf("the deleted document is still on the target (%d rows)", n)
	}
	verify("a delete and another insert")

	// A transaction open across a pass boundary: it takes its xid before
	// the pass, which cannot see its write, commits after; later
	// transactions commit on both sides of the pass.
	tx := slowEdit(t, e)
	mustExec(t, e.src, "UPDATE "+s+".memories SET importance = importance + 1 WHERE id = (SELECT id FROM "+s+".memories ORDER BY id DESC LIMIT 1)")
	if d, err := rel.CatchUp(ctx); err != nil || d < 1 {
		t.Fatalf("CatchUp with a transaction open: %d rows, %v; want the other update", d, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	mustExec(t, e.src, "UPDATE "+s+".memories SET importance = importance + 1 WHERE id = (SELECT id FROM "+s+".memories ORDER BY id DESC LIMIT 1)")
	if d, err := rel.CatchUp(ctx); err != nil || d < 2 {
		t.Fatalf("CatchUp after the commit: %d rows, %v; want 2 (the slow edit, the other update)", d, err)
	}
	if n := scalar[int64](t, e.dst, "SELECT count(*) FROM "+s+".memories WHERE content = 'slow edit'"); n != 1 {
		t.Fatalf("the slow edit is on the target %d times; want 1", n)
	}
	verify("a transaction open across a pass")
	if d, err := rel.CatchUp(ctx); err != nil || d != 0 {
		t.Fatalf("CatchUp without writes: %d rows, %v; want none", d, err)
	}
}

// TestRelocateFreezeNeverRevokedFirst pins Freeze's order: a login session
// with a write in flight, and one open but idle, are ended by the read-only
// freeze before the REVOKE, so their writes fail as unavailable (the
// session is gone) and never with 42501 (which the service answers 500);
// a new session's write gets 25006.
func TestRelocateFreezeNeverRevokedFirst(t *testing.T) {
	e := newCopiedMove(t, 10)
	ctx, s, rel := testCtx(t), e.spec.Schema, e.rel

	idle := loginConn(t, e.srcURL, e.res, e.res.Password)
	busy := loginConn(t, e.srcURL, e.res, e.res.Password)
	for _, c := range []string{"idle", "busy"} {
		conn := idle
		if c == "busy" {
			conn = busy
		}
		if _, err := conn.Exec(ctx, "SELECT count(*) FROM memories"); err != nil {
			t.Fatalf("%s session read: %v", c, err)
		}
	}
	btx, err := busy.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if _, err := btx.Exec(ctx, "INSERT INTO owner_locks (owner_id) VALUES ('in-flight')"); err != nil {
		t.Fatalf("in-flight write: %v", err)
	}
	if err := rel.Freeze(ctx); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	notRevoked := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s after Freeze worked; want it refused", what)
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			t.Fatalf("%s after Freeze met the REVOKE (42501): %v", what, err)
		}
	}
	notRevoked("the in-flight write's commit", btx.Commit(ctx))
	_, err = idle.Exec(ctx, "INSERT INTO owner_locks (owner_id) VALUES ('idle')")
	notRevoked("the idle session's write", err)
	if n := scalar[int64](t, e.src, "SELECT count(*) FROM "+s+".owner_locks WHERE owner_id IN ('in-flight', 'idle')"); n != 0 {
		t.Fatalf("%d writes of ended sessions committed; want none", n)
	}
	if code := loginWrite(t, e); code != "25006" {
		t.Fatalf("a new login session's write: SQLSTATE %q; want 25006", code)
	}
}

// TestRelocateVerifySinceBase pins the incremental Verify: after
// CatchUpVerified recorded a base, Verify compares counts and the rows
// changed since; it finds a write not caught up (an update, a delete, an
// update in a transaction open across the base pass), a target row
// changed behind the move's back among the changed keys, and a target
// row gone; it agrees with the full Verify when all is caught up.
func TestRelocateVerifySinceBase(t *testing.T) {
	e := newCopiedMove(t, 40)
	ctx, s, rel := testCtx(t), e.spec.Schema, e.rel
	slow := slowEdit(t, e)
	_, base, err := rel.CatchUpVerified(ctx)
	if err != nil || base.Rows < 100 || base.Tables < 15 {
		t.Fatalf("CatchUpVerified = %+v, %v; want every table compared", base, err)
	}
	if err := slow.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	mismatch := func(step, table string) {
		t.Helper()
		if _, err := rel.Verify(ctx); !errors.Is(err, ErrRelocateMismatch) || !strings.Contains(err.Error(), table) {
			t.Fatalf("Verify after %s: %v; want ErrRelocateMismatch naming %s", step, err, table)
		}
	}
	mismatch("a transaction open across the base pass committed", "memories")
	if _, err := rel.CatchUp(ctx); err != nil {
		t.Fatalf("CatchUp: %v", err)
	}
	if _, err := rel.Verify(ctx); err != nil {
		t.Fatalf("Verify after the pass: %v", err)
	}
	mustExec(t, e.src, "DELETE FROM "+s+".documents")
	mismatch("a delete not caught up", "documents")
	mustExec(t, e.src, "UPDATE "+s+".memories SET importance = 7 WHERE owner_id = 'o1'")
	mismatch("an update not caught up", "memories")
	if _, err := rel.CatchUp(ctx); err != nil {
		t.Fatalf("CatchUp: %v", err)
	}
	check, err := rel.Verify(ctx)
	if err != nil {
		t.Fatalf("Verify since the base: %v", err)
	}
	mustExec(t, e.dst, "DELETE FROM "+relocTable("relocate_state")+" WHERE schema_name = '"+s+"' AND kind = 'verified'")
	full, err := rel.Verify(ctx)
	if err != nil || full.Rows != check.Rows || full.Tables != check.Tables || full.Checksum == check.Checksum {
		t.Fatalf("full Verify = %+v, %v; want the rows and tables of the incremental %+v (another checksum)", full, err, check)
	}
	if _, _, err := rel.CatchUpVerified(ctx); err != nil {
		t.Fatalf("CatchUpVerified again: %v", err)
	}
	mustExec(t, e.src, "UPDATE "+s+".memories SET importance = 8 WHERE owner_id = 'o2'")
	if _, err := rel.CatchUp(ctx); err != nil {
		t.Fatalf("CatchUp: %v", err)
	}
	mustExec(t, e.dst, "UPDATE "+s+".memories SET content = 'tampered' WHERE owner_id = 'o2' AND id = (SELECT id FROM "+s+".memories WHERE owner_id = 'o2' ORDER BY id LIMIT 1)")
	mismatch("a changed key altered on the target", "memories")
	if _, err := rel.CatchUp(ctx); err != nil { // the tampered row keeps the source's xmin: the pass does not fix it
		t.Fatalf("CatchUp: %v", err)
	}
	mustExec(t, e.dst, "DELETE FROM "+s+".sessions")
	mismatch("a target row gone", "sessions")
}

// slowEdit begins a transaction on the source that sets the first
// memory's content to 'slow edit' and leaves it open: the caller commits
// it (it is rolled back at the end of the test otherwise).
func slowEdit(t *testing.T, e moveEnv) pgx.Tx {
	t.Helper()
	ctx, s := testCtx(t), e.spec.Schema
	tx, err := e.src.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, "UPDATE "+s+".memories SET content = 'slow edit' WHERE id = (SELECT id FROM "+s+".memories ORDER BY id LIMIT 1)"); err != nil {
		t.Fatalf("slow update: %v", err)
	}
	return tx
}
