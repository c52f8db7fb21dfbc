package memory

import (
	"context"
	"fmt"
	"testing"
	"time"
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
		for range size - 1 {
			_, err := f.admin.Exec(ctx(t), `INSERT INTO `+f.store.sql.memories+` (id, owner_id, source, category, content, embedding, importance)
				SELECT $2, owner_id, source, category, content || '.', embedding, 3 FROM `+f.store.sql.memories+` WHERE id = $1`, id, newID())
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	add("a healthy preference", "preference")
}

func TestJobs(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Forgetting.MinDecayScore = 0.5 }))
	seedJobs(t, f)
	before := f.count(`SELECT count(*) FROM %s`)
	activeBefore := f.count(`SELECT count(*) FROM %s WHERE active`)

	want := map[string]int64{OpDecay: 3, OpExpire: 2, OpPurge: 4, OpCompact: 3}
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
	if n := f.count(`SELECT count(*) FROM %s`); n != before-4 {
		t.Fatalf("%d rows after purge, want %d", n, before-4)
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE NOT active AND superseded_by IS NOT NULL`); n != 3 {
		t.Fatalf("%d superseded by compaction, want 3", n)
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE active`); n != activeBefore-3-2-3 {
		t.Fatalf("%d active after the jobs, want %d", n, activeBefore-8)
	}
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

func TestPurgeDoesNotBlockAdds(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Retention.PurgeInactiveAfter = 0 }))
	rows := make([]AddRequest, 300)
	for i := range rows {
		rows[i] = AddRequest{Owner: fmt.Sprintf("o%d", i%10), Content: fmt.Sprintf("bulk fact %d with words %d %d", i, i*7, i*13)}
	}
	if _, err := f.store.AddBatch(ctx(t), rows); err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE %s SET active = false, deactivated_at = now() - interval '1 day'`)
	done := make(chan error, 1)
	go func() {
		_, err := f.store.RunJob(context.Background(), OpPurge, JobOptions{BatchSize: 10})
		done <- err
	}()
	var slowest time.Duration
	for i := range 20 {
		start := time.Now()
		f.add(AddRequest{Owner: "writer", Content: fmt.Sprintf("fresh write %d during purge about %c", i, 'a'+i)})
		slowest = max(slowest, time.Since(start))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE NOT active`); n != 0 {
		t.Fatalf("%d inactive rows left after purge", n)
	}
	t.Logf("slowest add while purging: %s", slowest)
}
