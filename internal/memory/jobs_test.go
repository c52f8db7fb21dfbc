package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
)

// seedJobs creates, for owner "j": 3 memories decayed below 0.5, 2 expired,
// 4 inactive past retention (+1 inactive within it), and near-duplicate
// clusters of sizes 3 and 2 (3 memories to supersede); plus healthy ones.
func seedJobs(t *testing.T, f *fixture) {
	t.Helper()
	add := func(content, category string) string {
		return f.add(AddRequest{Owner: "j", Content: content, Category: category, Source: SourceUser}).Memory.ID
	}
	for i := range 3 {
		id := add(fmt.Sprintf("old contextual note %d about %c", i, 'p'+i), "contextual")
		f.exec(`UPDATE %s SET updated_at = now() - interval '40 days', expires_at = NULL WHERE id = $1`, id)
	}
	old := add("identity facts never decay", "identity")
	f.exec(`UPDATE %s SET updated_at = now() - interval '400 days' WHERE id = $1`, old)
	for i := range 2 {
		id := add(fmt.Sprintf("expired project %d about %c", i, 'x'+i), "project")
		f.exec(`UPDATE %s SET expires_at = now() - interval '1 hour' WHERE id = $1`, id)
	}
	for i := range 5 {
		id := add(fmt.Sprintf("deleted preference %d about %c", i, 'a'+i), "preference")
		if err := f.store.Delete(ctx(t), "j", id, SourceUser); err != nil {
			t.Fatal(err)
		}
		if i < 4 {
			f.exec(`UPDATE %s SET deactivated_at = now() - interval '31 days' WHERE id = $1`, id)
		}
	}
	for cluster, size := range []int{3, 2} {
		id := add(fmt.Sprintf("duplicated preference cluster %d", cluster), "preference")
		// Read, then insert: Citus 13.2 deparses this INSERT ... SELECT of
		// a single-shard table into invalid SQL ("( IS NOT NULL)").
		var owner, source, category, content, vec string
		if err := f.admin.QueryRow(ctx(t), `SELECT owner_id, source, category, content, embedding::text FROM `+f.store.sql.memories+` WHERE id = $1`,
			id).Scan(&owner, &source, &category, &content, &vec); err != nil {
			t.Fatal(err)
		}
		for range size - 1 {
			_, err := f.admin.Exec(ctx(t), `INSERT INTO `+f.store.sql.memories+` (id, owner_id, source, category, content, embedding, importance)
				VALUES ($1, $2, $3, $4, $5 || '.', $6::text::vector, 3)`, core.NewID(), owner, source, category, content, vec)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	add("a healthy preference", "preference")
}

// seedJobsAffected is how many rows each operation changes after seedJobs.
var seedJobsAffected = map[string]int64{OpDecay: 3, OpExpire: 2, OpPurge: 4, OpCompact: 3}

// newJobsFixture is a fixture (MinDecayScore 0.5) seeded by seedJobs, and
// its count of memories and of active ones.
func newJobsFixture(t *testing.T) (f *fixture, before, activeBefore int64) {
	t.Helper()
	f = newFixture(t, withPolicy(func(p *Policy) { p.Forgetting.MinDecayScore = 0.5 }))
	seedJobs(t, f)
	return f, f.count(`SELECT count(*) FROM %s`), f.count(`SELECT count(*) FROM %s WHERE active`)
}

// checkJobsDone checks the memories once every operation ran on
// seedJobs's rows: 4 purged, 3 superseded by compaction, 8 fewer active.
func checkJobsDone(t *testing.T, f *fixture, before, activeBefore int64) {
	t.Helper()
	if n := f.count(`SELECT count(*) FROM %s`); n != before-4 {
		t.Fatalf("%d rows after purge, want %d", n, before-4)
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE NOT active AND superseded_by IS NOT NULL`); n != 3 {
		t.Fatalf("%d superseded by compaction, want 3", n)
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE active`); n != activeBefore-3-2-3 {
		t.Fatalf("%d active after the jobs, want %d", n, activeBefore-8)
	}
}

func TestJobs(t *testing.T) {
	f, before, activeBefore := newJobsFixture(t)
	want := seedJobsAffected
	for _, op := range Operations {
		res, err := f.store.RunJob(ctx(t), op, JobOptions{DryRun: true, BatchSize: 2})
		if err != nil || res.Affected != want[op] || !res.DryRun {
			t.Fatalf("dry-run %s = %+v, %v; want %d affected", op, res, err, want[op])
		}
	}
	if f.count(`SELECT count(*) FROM %s`) != before || f.count(`SELECT count(*) FROM %s WHERE active`) != activeBefore {
		t.Fatal("a dry run changed rows")
	}

	for _, op := range Operations {
		res, err := f.store.RunJob(ctx(t), op, JobOptions{BatchSize: 2})
		if err != nil || res.Affected != want[op] {
			t.Fatalf("%s = %+v, %v; want %d affected", op, res, err, want[op])
		}
		if op == OpDecay && (res.Scanned != activeBefore || res.Batches < 2) {
			t.Errorf("decay scanned %d rows in %d batches, want %d in several", res.Scanned, res.Batches, activeBefore)
		}
		t.Logf("%s: %+v", op, *res)
	}
	checkJobsDone(t, f, before, activeBefore)
	var forgotten int64
	_ = f.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+f.store.sql.history+` WHERE action = 'forget' AND actor = 'job'`).Scan(&forgotten)
	if forgotten != 3 {
		t.Fatalf("%d forget history rows, want 3", forgotten)
	}
	for _, op := range Operations {
		if res, err := f.store.RunJob(ctx(t), op, JobOptions{}); err != nil || res.Affected != 0 {
			t.Fatalf("second %s run = %+v, %v; want nothing left to do", op, res, err)
		}
	}
	if _, err := f.store.RunJob(ctx(t), "defrag", JobOptions{}); err == nil {
		t.Fatal("unknown operation accepted")
	}
}

// TestPurgeDoesNotBlockAdds: while a purge batch holds every lock it takes
// (its statement run in a transaction left open), adds complete: for
// another owner, for the owner being purged, and of the very text of a row
// being purged (which, as a dedup neighbour, an add would lock). With the
// store's lock_timeout of 500 ms, an add that needed one of the batch's
// locks would fail with ErrBusy instead of passing.
func TestPurgeDoesNotBlockAdds(t *testing.T) {
	f := newFixture(t, withSession(SessionSettings{LockTimeout: 500 * time.Millisecond}))
	var purged []string
	for i := range 20 {
		m := f.add(AddRequest{Owner: "gone", Content: fmt.Sprintf("old fact %d with words %d %d", i, i*7, i*13)}).Memory
		purged = append(purged, m.Content)
	}
	f.add(AddRequest{Owner: "other", Content: "an active fact of another owner"})
	f.exec(`UPDATE %s SET active = false, deactivated_at = now() - interval '31 days' WHERE owner_id = 'gone'`)
	// One purge batch of all 20 rows, holding its locks until the test commits.
	tx, err := f.store.core.Pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var n int64
	if err := tx.QueryRow(ctx(t), (*maintenance)(f.store).purgeBatchSQL(), 100).Scan(&n); err != nil || n != 20 {
		t.Fatalf("purge batch = %d, %v; want the 20 due rows", n, err)
	}
	for _, req := range []AddRequest{
		{Owner: "other", Content: "a new fact of another owner"},
		{Owner: "gone", Content: "a new fact of the owner being purged"},
		{Owner: "gone", Content: purged[3]},
	} {
		r, err := f.store.Add(ctx(t), req)
		if err != nil || r.Action != ActionAdded {
			t.Fatalf("Add(%q) while a purge batch holds its locks = %+v, %v; want added without waiting", req.Content, r, err)
		}
	}
	if err := tx.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE NOT active`); n != 0 {
		t.Fatalf("%d inactive rows left after purge", n)
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE owner_id = 'gone'`); n != 2 {
		t.Fatalf("the owner being purged has %d memories, want the 2 added meanwhile", n)
	}
}
