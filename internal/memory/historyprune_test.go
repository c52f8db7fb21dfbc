package memory

import (
	"fmt"
	"testing"
)

// TestMemoryHistoryKeepsTheNewest: issue 26's review grew one memory's
// history without bound by updating it (1,000 PATCHes, 3.3 MB). With
// maxHistoryPerMemory 5, twelve updates leave the row that created the
// memory and the newest five; merges by add (the same text written again,
// reactivating it after a delete too) prune the same way, and another
// memory's history is untouched.
func TestMemoryHistoryKeepsTheNewest(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Limits.MaxHistoryPerMemory = 5 }))
	m := f.add(AddRequest{Owner: "ann", Content: "Ann's build takes ten minutes", Category: "project"}).Memory
	other := f.add(AddRequest{Owner: "ann", Content: "Ann prefers the night train to Vienna", Category: "preference"}).Memory
	for i := range 12 {
		content := fmt.Sprintf("Ann's build takes %d minutes", 11+i)
		if _, err := f.store.Update(ctx(t), UpdateRequest{Owner: "ann", ID: m.ID, Content: &content, Source: SourceAgent}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.Update(ctx(t), UpdateRequest{Owner: "ann", ID: other.ID, Importance: ptr(1 + i%9), Source: SourceAgent}); err != nil {
			t.Fatal(err)
		}
	}
	hist, err := f.history("ann", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 6 || hist[0].Action != "add" || *hist[0].NewContent != "Ann's build takes ten minutes" ||
		*hist[1].NewContent != "Ann's build takes 18 minutes" || *hist[5].NewContent != "Ann's build takes 22 minutes" {
		t.Fatalf("history after 12 updates: %s, want the add and the newest 5 updates", describeHistory(hist))
	}
	if n := f.historyCount(other.ID); n != 6 {
		t.Fatalf("the other memory keeps %d history rows, want 6", n)
	}

	// Writing the same text again merges into the memory; deleting it and
	// writing it once more reactivates it: each write prunes.
	last := "Ann's build takes 22 minutes"
	for i := range 8 {
		if i%4 == 3 {
			if err := f.store.Delete(ctx(t), "ann", m.ID, SourceAgent); err != nil {
				t.Fatal(err)
			}
		}
		if res := f.add(AddRequest{Owner: "ann", Content: last, Category: "project"}); res.Memory.ID != m.ID {
			t.Fatalf("write %d ended in %s (%s), want a merge into %s", i, res.Memory.ID, res.Action, m.ID)
		}
	}
	hist, err = f.history("ann", m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 6 || hist[0].Action != "add" || hist[5].Action != string(ActionMerged) && hist[5].Action != string(ActionReactivated) {
		t.Fatalf("history after 8 more writes: %s, want the add and the newest 5", describeHistory(hist))
	}
}

func describeHistory(h []HistoryEntry) string {
	out := fmt.Sprintf("%d rows:", len(h))
	for _, e := range h {
		text := ""
		if e.NewContent != nil {
			text = *e.NewContent
		}
		out += fmt.Sprintf(" [%s %q]", e.Action, text)
	}
	return out
}
