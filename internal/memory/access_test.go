package memory

import (
	"testing"
	"time"
)

func TestDuePendingThrottles(t *testing.T) {
	now := time.Now()
	pending := map[string]int{"a": 2, "b": 1}
	written := map[string]time.Time{"b": now.Add(-10 * time.Second)}
	due := duePending(pending, written, now)
	if due["a"] != 2 || len(due) != 1 {
		t.Fatalf("due = %v, want only a (b was written 10 s ago)", due)
	}
	if pending["b"] != 1 || written["a"] != now {
		t.Fatalf("pending %v written %v", pending, written)
	}
	pending["b"]++ // accesses add up while throttled
	due = duePending(pending, written, now.Add(accessThrottle))
	if due["b"] != 2 || len(pending) != 0 {
		t.Fatalf("after the throttle: due %v pending %v", due, pending)
	}
}

// xminOf is the inserting transaction of the memories row id, as text.
func xminOf(t *testing.T, f *fixture, id string) string {
	t.Helper()
	var x string
	if err := f.admin.QueryRow(ctx(t), `SELECT xmin::text FROM `+f.store.sql.memories+` WHERE id = $1`, id).Scan(&x); err != nil {
		t.Fatal(err)
	}
	return x
}

// TestAccessStatisticsLeaveMemoriesAlone: a search's access statistics go
// to memory_access (the memories rows, and so the visibility map the
// owner-local index-only scans rely on, are not written), are read back
// with the memory and in its decay, and go with the owner on erase.
func TestAccessStatisticsLeaveMemoriesAlone(t *testing.T) {
	f := newFixture(t)
	m := f.add(AddRequest{Owner: "ann", Content: "Ann prefers window seats", Category: "preference"}).Memory
	f.add(AddRequest{Owner: "bob", Content: "Bob prefers aisle seats", Category: "preference"})
	x0 := xminOf(t, f, m.ID)
	for _, who := range []string{"ann", "ann", "bob"} {
		if _, err := f.store.Search(ctx(t), SearchRequest{Owner: who, Query: "seats", Mode: SearchVector}); err != nil {
			t.Fatal(err)
		}
	}
	f.store.access.flush()
	got, err := f.store.Get(ctx(t), "ann", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.AccessCount != 2 || got.LastAccessedAt == nil {
		t.Fatalf("after two searches: count %d, last access %v", got.AccessCount, got.LastAccessedAt)
	}
	// The memories row itself is untouched: not written since the add.
	if n := f.count(`SELECT count(*) FROM %s WHERE id = $1 AND access_count = 0 AND last_accessed_at IS NULL AND xmin = $2::text::xid`,
		m.ID, x0); n != 1 {
		t.Fatalf("the search wrote the memories row")
	}
	access := func(owner string) int64 {
		var n int64
		if err := f.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+f.store.sql.access+` WHERE owner_id = $1`, owner).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if access("ann") != 1 || access("bob") != 1 {
		t.Fatalf("access rows: ann %d, bob %d", access("ann"), access("bob"))
	}
	if _, err := f.store.EraseOwner(ctx(t), "ann"); err != nil {
		t.Fatal(err)
	}
	if access("ann") != 0 || access("bob") != 1 {
		t.Fatalf("after erasing ann: ann %d, bob %d access rows", access("ann"), access("bob"))
	}
}
