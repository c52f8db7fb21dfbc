package memory

import (
	"errors"
	"testing"
)

// TestEvictionIsRecordedInHistory: a memory evicted over the per-owner cap
// is gone, but its history says so — one row, action evict, actor system,
// no content, the cap in the details — so a client that holds the id can
// tell an eviction from a lost write. Another owner learns nothing: the
// same id is not found for them. Its other history rows are gone with it.
func TestEvictionIsRecordedInHistory(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Limits.MaxMemoriesPerOwner = 3 }))
	first := f.add(AddRequest{Owner: "capped", Content: "fact one about apples", Importance: 1, Source: SourceUser})
	two := 2
	if _, err := f.store.Update(ctx(t), UpdateRequest{Owner: "capped", ID: first.Memory.ID, Importance: &two, Source: SourceUser}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"fact two about bridges", "fact three about clouds", "fact four about dunes"} {
		f.add(AddRequest{Owner: "capped", Content: c, Importance: 9, Source: SourceUser})
	}
	if _, err := f.store.Get(ctx(t), "capped", first.Memory.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("precondition: the lowest-value memory was not evicted: %v", err)
	}
	hist, err := f.history("capped", first.Memory.ID)
	if err != nil {
		t.Fatalf("history of an evicted memory: %v", err)
	}
	if len(hist) != 1 {
		t.Fatalf("history of an evicted memory has %d rows, want its eviction only: %+v", len(hist), hist)
	}
	h := hist[0]
	if h.Action != HistoryEvict || h.Actor != SourceSystem || h.MemoryID != first.Memory.ID || h.OldContent != nil || h.NewContent != nil {
		t.Fatalf("eviction row %+v, want action %q, actor system, no content", h, HistoryEvict)
	}
	if h.Details["maxMemoriesPerOwner"] != float64(3) || h.Details["category"] != "contextual" || h.Details["wasActive"] != true {
		t.Fatalf("eviction row details %v", h.Details)
	}
	if _, err := f.history("someone-else", first.Memory.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another owner reads the eviction of capped's memory: %v", err)
	}
	if _, err := f.history("capped", "0b6c2f1e-8d1a-4c3e-9f57-2a9d0c4b7e11"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("history of an id that never existed: %v", err)
	}
}

// TestPurgeRemovesOldEvictionRecords: the purge job deletes eviction rows
// older than the retention (in batches, found by the partial index of
// migration history_evictions), so writing past the cap does not grow history without
// bound; newer ones stay.
func TestPurgeRemovesOldEvictionRecords(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Limits.MaxMemoriesPerOwner = 2 }))
	var ids []string
	for _, c := range []string{"fact one about apples", "fact two about bridges", "fact three about clouds", "fact four about dunes", "fact five about engines"} {
		ids = append(ids, f.add(AddRequest{Owner: "capped", Content: c, Source: SourceUser}).Memory.ID)
	}
	evictions := func() int64 {
		t.Helper()
		var n int64
		if err := f.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+f.store.sql.history+` WHERE action = $1`, HistoryEvict).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := evictions(); n != 3 {
		t.Fatalf("precondition: %d eviction rows, want 3", n)
	}
	// Two of them are older than the retention.
	if _, err := f.admin.Exec(ctx(t), `UPDATE `+f.store.sql.history+` SET created_at = now() - interval '400 days'
		WHERE action = $1 AND memory_id = ANY($2::uuid[])`, HistoryEvict, ids[:2]); err != nil {
		t.Fatal(err)
	}
	res, err := f.store.RunJob(ctx(t), OpPurge, JobOptions{BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if n := evictions(); n != 1 {
		t.Fatalf("after the purge %d eviction rows are left, want the recent one", n)
	}
	if _, err := f.history("capped", ids[2]); err != nil {
		t.Fatalf("the recent eviction's record: %v", err)
	}
	var indexed bool
	if err := f.admin.QueryRow(ctx(t), `SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = $1
		AND indexname = 'memory_history_evicted_idx' AND indexdef LIKE '%WHERE (action = ''evict''::text)')`, f.store.core.Schema).Scan(&indexed); err != nil || !indexed {
		t.Fatalf("the partial index memory_history_evicted_idx (migration history_evictions) is missing (%v)", err)
	}
	if res.Affected != 0 || res.Batches < 3 {
		t.Fatalf("purge result %+v: eviction rows are not memories (affected 0), deleted one batch at a time", res)
	}
}
