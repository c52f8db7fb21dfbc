package tenant

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestRelocateResumeUnfreezeAbort: a copy cut off (a context that ends, a
// Budget of one chunk per call) resumes where its last chunk committed and
// ends equal to the source; Unfreeze gives back exactly the grants and
// settings the login role had; DropIncoming drops the target's copy and
// leaves the source the tenant's home.
func TestRelocateResumeUnfreezeAbort(t *testing.T) {
	e := newMoveEnv(t, 4)
	ctx, s := testCtx(t), e.spec.Schema
	fillTenant(t, e.src, s, 4, 200)
	rel := e.rel
	rel.ChunkRows = 25
	// Roles are server-wide: another database of the source's server is
	// refused, before anything is created there.
	same := e.rel
	sameURL := testenv.NewDatabase(t)
	same.Target = testenv.NewPool(t, sameURL, 2)
	if err := same.Prepare(ctx); !errors.Is(err, ErrRelocateSameServer) {
		t.Fatalf("Prepare to the source's server: %v; want ErrRelocateSameServer", err)
	}
	if scalar[bool](t, same.Target, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", s) {
		t.Fatal("the refused Prepare created the schema")
	}
	if err := rel.Prepare(ctx); err != nil {
		t.Fatalf("Prepare: %v", err)
	}

	cut, cancel := context.WithTimeout(ctx, time.Millisecond)
	time.Sleep(2 * time.Millisecond)
	if _, _, err := rel.Copy(cut); err == nil {
		t.Fatal("Copy with an ended context worked")
	}
	cancel()
	rel.Budget = time.Nanosecond // one chunk (or one index) per call
	var reports int
	rel.Progress = func(RelocateProgress) { reports++ }
	calls, p := copyAll(t, ctx, rel)
	if calls < 8 || p.CopiedRows != p.TotalRows {
		t.Fatalf("Copy took %d calls, progress %+v; want one chunk per call, every row copied", calls, p)
	}
	if reports == 0 {
		t.Fatal("Copy never reported its progress")
	}
	if n := scalar[int64](t, e.dst, "SELECT count(*) FROM "+relocTable("relocate_rows")+" WHERE schema_name = $1", s); n != p.TotalRows {
		t.Fatalf("row map holds %d rows; want %d (one per copied row, none twice)", n, p.TotalRows)
	}
	if _, err := rel.Verify(ctx); err != nil {
		t.Fatalf("Verify after a resumed copy: %v", err)
	}

	before := loginGrants(t, e)
	open := loginConn(t, e.srcURL, e.res, e.res.Password)
	if _, err := open.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	// A write transaction left open: Freeze waits lock_timeout, then ends
	// it (never acknowledged, rolled back).
	if _, err := open.Exec(ctx, "BEGIN; INSERT INTO owner_locks (owner_id) VALUES ('in-flight')"); err != nil {
		t.Fatal(err)
	}
	if err := rel.Freeze(ctx); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	if _, err := open.Exec(ctx, "COMMIT"); err == nil {
		t.Fatal("a login session opened before Freeze committed; want it ended (it would stay writable)")
	}
	if scalar[bool](t, e.src, "SELECT EXISTS (SELECT 1 FROM "+s+".owner_locks WHERE owner_id = 'in-flight')") {
		t.Fatal("the write of a session ended by Freeze is there")
	}
	if frozen, err := rel.Frozen(ctx); err != nil || !frozen {
		t.Fatalf("Frozen = %v, %v; want true", frozen, err)
	}
	if code := loginWrite(t, e); code != "25006" {
		t.Fatalf("a login write on the frozen source: SQLSTATE %q; want 25006", code)
	}
	if loginGrants(t, e) == before {
		t.Fatal("Freeze left the login role's grants as they were")
	}
	if err := rel.Unfreeze(ctx); err != nil {
		t.Fatalf("Unfreeze: %v", err)
	}
	if after := loginGrants(t, e); after != before {
		t.Fatalf("grants after Unfreeze:\n%s\nbefore Freeze:\n%s", after, before)
	}
	if code := loginWrite(t, e); code != "" {
		t.Fatalf("a login write after Unfreeze: SQLSTATE %q; want it written", code)
	}
	if frozen, err := rel.Frozen(ctx); err != nil || frozen {
		t.Fatalf("Frozen after Unfreeze = %v, %v; want false", frozen, err)
	}
	if c := schemaComment(t, e.src, s); c != e.spec.Owner.marker() {
		t.Fatalf("source marker after Unfreeze %q; want %q", c, e.spec.Owner.marker())
	}
	if err := rel.MarkMoved(ctx, ServerIdentity{System: "1"}); !errors.Is(err, ErrRelocateNotFrozen) {
		t.Fatalf("MarkMoved of a source not frozen: %v; want ErrRelocateNotFrozen", err)
	}

	if _, err := Drop(ctx, e.dst, s, e.spec.Owner); !errors.Is(err, ErrOwnedByOther) {
		t.Fatalf("Drop of the incoming copy: %v; want ErrOwnedByOther (DropIncoming drops it)", err)
	}
	if err := rel.DropIncoming(ctx); err != nil {
		t.Fatalf("DropIncoming: %v", err)
	}
	if err := rel.DropIncoming(ctx); err != nil {
		t.Fatalf("DropIncoming again: %v", err)
	}
	if scalar[bool](t, e.dst, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) OR EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $2)
		OR EXISTS (SELECT 1 FROM `+relocTable("relocate_rows")+` WHERE schema_name = $1)`, s, e.res.LoginRole) {
		t.Fatal("the incoming copy, its login role or its row map is still on the target")
	}
	if home, err := HoldsTenant(ctx, e.src, s, e.spec.Owner, Claim{}); err != nil || !home {
		t.Fatalf("HoldsTenant(source after the abort) = %v, %v; want true", home, err)
	}
}
