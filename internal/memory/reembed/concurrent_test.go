package reembed_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/memory/reembed"
)

// TestReembedWithWritesDuringTheFill: a service of the old embedder adds
// memories and rewrites others' text while the fill runs (writes not wired
// to the new embedder yet, the worst case). No write fails, and after the
// fill catches up and the switch, every memory, added or rewritten, holds
// the new embedder's vector of its current text: none kept a vector of a
// text it no longer has.
func TestReembedWithWritesDuringTheFill(t *testing.T) {
	f := newFixture(t)
	seeded := f.seed(60)
	rows, err := f.admin.Query(ctx(t), `SELECT id::text, owner_id FROM `+f.target.Schema+`.memories ORDER BY id LIMIT 30`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ id, owner string }
	var ids []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.owner); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r)
	}
	if rows.Err() != nil || len(ids) != 30 {
		t.Fatalf("memories to rewrite: %d, %v", len(ids), rows.Err())
	}
	to, emb := f.beginBuiltin(t, 768)
	writes := make(chan error, 1)
	go func() {
		defer close(writes)
		for i, r := range ids {
			text := fmt.Sprintf("rewritten %d: the %s moved to week %d", i, topics[i%len(topics)], 100+i)
			if _, err := f.old.Update(ctx(t), memory.UpdateRequest{Owner: r.owner, ID: r.id, Content: &text}); err != nil {
				writes <- fmt.Errorf("update %s: %w", r.id, err)
				return
			}
			if _, err := f.old.Add(ctx(t), memory.AddRequest{Owner: "owner-9", Content: fmt.Sprintf("added during the fill %d: %s", i, topic(i+500))}); err != nil {
				writes <- fmt.Errorf("add %d: %w", i, err)
				return
			}
		}
	}()
	fl := reembed.NewFiller(f.login, f.target, to, emb)
	var during int64
	for busy := true; busy; {
		select {
		case err, open := <-writes:
			if err != nil {
				t.Fatal(err)
			}
			busy = open
		default:
		}
		n, _, err := fl.FillBatch(ctx(t), 8)
		if err != nil {
			t.Fatalf("a batch during the writes: %v", err)
		}
		during += n
	}
	after := fill(t, fl, 64)
	if err := reembed.Switch(ctx(t), f.admin, f.target); err != nil {
		t.Fatal(err)
	}
	want := seeded.memories + 30
	if n := f.checkVectors(emb, "memories", "content", "embedding"); n != want {
		t.Errorf("%d memories checked, want %d", n, want)
	}
	if n := f.count(`SELECT count(*) FROM %[1]s.memories WHERE content LIKE 'rewritten %%'`); n != 30 {
		t.Errorf("%d rewritten memories, want 30", n)
	}
	t.Logf("filled %d rows during the writes, %d after", during, after)
}

// TestReembedSwitchIsAllOrNothing: a reader that holds one of the four
// tables makes the switch's transaction give up at its lock timeout
// (after the covering index on the shadow column was built): nothing is
// switched, the old vectors stay in place, and the switch goes through
// once the reader is gone.
func TestReembedSwitchIsAllOrNothing(t *testing.T) {
	f := newFixture(t)
	seeded := f.seed(10)
	to, emb := f.beginBuiltin(t, 512)
	fill(t, reembed.NewFiller(f.login, f.target, to, emb), 64)
	reader, err := f.admin.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reader.Rollback(ctx(t)) }()
	var n int64
	if err := reader.QueryRow(ctx(t), `SELECT count(*) FROM `+f.target.Schema+`.episodes`).Scan(&n); err != nil || n != seeded.episodes {
		t.Fatalf("the reader's episodes: %d, %v", n, err)
	}
	short := f.target
	short.LockTimeout = 200 * time.Millisecond
	if err := reembed.Switch(ctx(t), f.admin, short); err == nil || !strings.Contains(err.Error(), "lock timeout") {
		t.Fatalf("Switch with a table held: %v, want a lock timeout", err)
	}
	st, err := reembed.ReadState(ctx(t), f.login, f.target)
	if err != nil || st.Phase != reembed.PhaseFilling || st.Current != f.from {
		t.Errorf("state after the failed switch: %+v, %v; want still filling from %s", st, err, f.from)
	}
	if c, i, tr := f.reembedObjects(); c != 4 || i != 4 || tr != 2 {
		t.Errorf("after the failed switch: %d shadow columns, %d todo indexes, %d text triggers; want 4, 4, 2", c, i, tr)
	}
	if n := f.checkVectors(f.oldEmbedder(), "memories", "content", "embedding"); n != seeded.memories {
		t.Errorf("%d memories kept their old vector after the failed switch, want %d", n, seeded.memories)
	}
	if err := reader.Rollback(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := reembed.Switch(ctx(t), f.admin, short); err != nil {
		t.Fatalf("Switch once the reader is gone: %v", err)
	}
	if n := f.checkVectors(emb, "episodes", "summary", "embedding"); n != seeded.episodes {
		t.Errorf("%d episodes hold the new vector after the switch, want %d", n, seeded.episodes)
	}
}
