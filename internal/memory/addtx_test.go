package memory

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestConcurrentSameTextNewOwners: 12 writers add the same text at once to
// each of 4 owners that have never written (so the owner's lock row is
// created by the race itself); each owner must end with exactly one memory,
// one 'add' and 11 merges, and one lock row.
func TestConcurrentSameTextNewOwners(t *testing.T) {
	f := newFixture(t)
	const writers, owners = 12, 4
	var wg sync.WaitGroup
	errs := make(chan error, writers*owners)
	actions := make(chan string, writers*owners)
	for w := range writers {
		wg.Go(func() {
			for i := range owners {
				owner := fmt.Sprintf("fresh-%d", (i+w)%owners) // every writer in another order
				r, err := f.store.Add(ctx(t), AddRequest{Owner: owner, Content: "Keeps the office plants watered on Mondays"})
				if err != nil {
					errs <- err
					return
				}
				actions <- owner + " " + string(r.Action)
			}
		})
	}
	wg.Wait()
	close(errs)
	close(actions)
	for err := range errs {
		t.Fatalf("concurrent add: %v", err)
	}
	counts := map[string]int{}
	for a := range actions {
		counts[a]++
	}
	for i := range owners {
		owner := fmt.Sprintf("fresh-%d", i)
		if counts[owner+" added"] != 1 || counts[owner+" merged"] != writers-1 {
			t.Errorf("%s: actions %v, want 1 added and %d merged", owner, counts, writers-1)
		}
		if n := f.count(`SELECT count(*) FROM %s WHERE owner_id = $1`, owner); n != 1 {
			t.Errorf("%s has %d memories, want exactly 1", owner, n)
		}
		var locks int
		if err := f.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+f.store.sql.ownerLocks+` WHERE owner_id = $1`, owner).Scan(&locks); err != nil || locks != 1 {
			t.Errorf("%s has %d lock rows (%v), want 1", owner, locks, err)
		}
	}
}

// TestFailedAddRollsBack: an insert that fails in the round trip that also
// carries the COMMIT leaves nothing written, and the connection it used
// (the pool has one) is back in a clean state for the next add; a batch
// whose second item fails writes none of its owner's items.
func TestFailedAddRollsBack(t *testing.T) {
	f := newFixture(t, withMaxConns(1))
	f.exec(`ALTER TABLE %s ADD CONSTRAINT test_no_boom CHECK (content NOT LIKE 'boom%%')`)
	if _, err := f.store.Add(ctx(t), AddRequest{Owner: "o", Content: "boom goes the insert"}); err == nil {
		t.Fatal("an insert the table refuses succeeded")
	}
	r := f.add(AddRequest{Owner: "o", Content: "a fine memory after the failure"})
	if r.Action != ActionAdded {
		t.Fatalf("add after a failed add = %+v", r)
	}
	_, err := f.store.AddBatch(ctx(t), []AddRequest{{Owner: "b", Content: "first of the batch"}, {Owner: "b", Content: "boom in the middle"}, {Owner: "b", Content: "last of the batch"}})
	if err == nil {
		t.Fatal("a batch with a refused item succeeded")
	}
	if n := f.count(`SELECT count(*) FROM %s`); n != 1 {
		t.Fatalf("%d memories after the failures, want only the fine one", n)
	}
	var hist int
	if err := f.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+f.store.sql.history).Scan(&hist); err != nil || hist != 1 {
		t.Fatalf("%d history rows (%v), want 1", hist, err)
	}
	conn, err := f.store.core.Pool.Acquire(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if st := conn.Conn().PgConn().TxStatus(); st != 'I' {
		t.Fatalf("the pool's connection is in transaction status %q, want idle ('I')", st)
	}
}

// TestOwnerLockWaitsAndSurvivesErase: an add waits while another
// transaction holds the owner's lock, and when that transaction deletes the
// lock row (as erase does) and commits, the waiting add creates the row
// again and goes on.
func TestOwnerLockWaitsAndSurvivesErase(t *testing.T) {
	f := newFixture(t)
	f.add(AddRequest{Owner: "held", Content: "the owner's first memory"})
	tx, err := f.store.core.Pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if err := f.store.lockOwner(ctx(t), tx, "held"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := f.store.Add(ctx(t), AddRequest{Owner: "held", Content: "a write behind the held lock"})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the add did not wait for the owner's lock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := tx.Exec(ctx(t), `DELETE FROM `+f.store.sql.ownerLocks+` WHERE owner_id = 'held'`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the add behind the erased lock row: %v", err)
		}
	case <-time.After(promptly):
		t.Fatal("the add still waits after the lock was released")
	}
	var locks int
	if err := f.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+f.store.sql.ownerLocks+` WHERE owner_id = 'held'`).Scan(&locks); err != nil || locks != 1 {
		t.Fatalf("%d lock rows (%v), want the one the add created again", locks, err)
	}
}

// TestAddBatchEvictsOverCap: the cap check travels with the inserts (the
// owner's row count in the insert statement); a batch that takes the owner
// over the cap evicts the oldest, least important memories after commit,
// never the batch's own.
func TestAddBatchEvictsOverCap(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Limits.MaxMemoriesPerOwner = 5 }))
	var old []string
	for i, c := range []string{"apples grow in the orchard", "bridges span the river", "clouds gather in the west", "dunes shift in the desert"} {
		old = append(old, f.add(AddRequest{Owner: "capped", Content: c, Importance: i + 1}).Memory.ID)
	}
	res, err := f.store.AddBatch(ctx(t), []AddRequest{
		{Owner: "capped", Content: "engines hum in the hangar", Importance: 9},
		{Owner: "capped", Content: "forests cover the hills", Importance: 9},
		{Owner: "capped", Content: "glaciers carve the valley", Importance: 9},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[2].Evicted != 2 || res[0].Evicted != 0 || res[1].Evicted != 0 {
		t.Fatalf("evicted %d/%d/%d, want 2 reported on the last item", res[0].Evicted, res[1].Evicted, res[2].Evicted)
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE owner_id = 'capped'`); n != 5 {
		t.Fatalf("owner has %d memories, cap is 5", n)
	}
	for _, r := range res {
		if _, err := f.store.Get(ctx(t), "capped", r.Memory.ID); err != nil {
			t.Fatalf("the batch's own memory was evicted: %v", err)
		}
	}
	for i, id := range old[:2] {
		if _, err := f.store.Get(ctx(t), "capped", id); err == nil {
			t.Fatalf("old memory %d (importance %d) was kept over the cap", i, i+1)
		}
	}
}
