package reembed_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/memory/pg"
	"github.com/engram-dev/engram/internal/memory/reembed"
)

// TestReembedGuardRefusesTheOldEmbedderAfterTheSwitch (review finding L6):
// after a switch to an embedder of the same dimensions, a store whose
// session names the old embedder (a service pod not yet rolled) cannot
// write an old-model vector into the swapped column: the guard raises
// GuardSQLState, which the engine reports as busy (503, Retry-After); a
// session naming the new embedder, or none, writes.
func TestReembedGuardRefusesTheOldEmbedderAfterTheSwitch(t *testing.T) {
	if reembed.GuardSQLState != pg.SQLStateWrongEmbedder {
		t.Fatalf("the guard raises %s, the engine knows %s", reembed.GuardSQLState, pg.SQLStateWrongEmbedder)
	}
	f := newFixture(t)
	f.seed(4)
	to := reembed.Named("openai", "other-model", 384)
	_, emb := builtin(t, 384)
	f.begin(t, to)
	fill(t, reembed.NewFiller(f.login, f.target, to, emb), 64)
	if err := reembed.Switch(ctx(t), f.admin, f.target); err != nil {
		t.Fatal(err)
	}
	storeNaming := func(name string) *memory.Store {
		pool, err := memory.NewPool(ctx(t), f.logURL, 2, memory.SessionSettings{Embedder: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		s, err := memory.New(memory.Config{Pool: pool, Schema: f.target.Schema, Policy: memory.DefaultPolicy(), Embedder: emb})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	add := func(s *memory.Store, content string) error {
		_, err := s.Add(ctx(t), memory.AddRequest{Owner: "guard", Content: content, Category: "project"})
		return err
	}
	err := add(storeNaming(f.from.String()), "written by a pod of the old embedder")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != reembed.GuardSQLState || !errors.Is(err, memory.ErrBusy) {
		t.Fatalf("an add naming the old embedder after the switch: %v; want SQLSTATE %s reported as busy", err, reembed.GuardSQLState)
	}
	t.Logf("refused: %v", err)
	if err := add(storeNaming(to.String()), "written by a pod of the new embedder"); err != nil {
		t.Errorf("an add naming the new embedder: %v", err)
	}
	if err := add(storeNaming(""), "written by a session that names no embedder"); err != nil {
		t.Errorf("an add naming no embedder: %v", err)
	}
	if n := f.count(`SELECT count(*) FROM %s.memories WHERE owner_id = 'guard'`); n != 2 {
		t.Errorf("%d memories of owner guard, want 2", n)
	}
}
