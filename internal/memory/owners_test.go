package memory

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
)

// TestOwnersPagesCountsAndActivity: every owner with memories appears once,
// in id order, across pages of a small limit; the counts split active from
// inactive rows; lastActivity follows writes and reads; an owner erased
// disappears; Only restricts the listing to one owner.
func TestOwnersPagesCountsAndActivity(t *testing.T) {
	f := newFixture(t)
	want := map[string][2]int64{} // owner -> active, inactive
	for i := range 7 {
		owner := fmt.Sprintf("owner-%02d", i)
		for j := range i%3 + 1 {
			f.add(AddRequest{Owner: owner, Content: fmt.Sprintf("%s fact %d about the colour %d", owner, j, i*10+j)})
		}
		want[owner] = [2]int64{int64(i%3 + 1), 0}
	}
	// owner-01 has one of its two memories deleted: 1 active, 1 inactive.
	page, err := f.store.List(ctx(t), ListRequest{Owner: "owner-01"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Delete(ctx(t), "owner-01", page.Items[0].ID, SourceUser); err != nil {
		t.Fatal(err)
	}
	want["owner-01"] = [2]int64{1, 1}
	// owner-03's memory was read an hour from now (a clock set ahead):
	// lastActivity is the latest of writes and reads (reads are recorded in
	// the access statistics table, migration 8).
	future := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	f.exec(`INSERT INTO `+f.store.sql.access+` (memory_id, owner_id, access_count, last_accessed_at)
		SELECT id, owner_id, 1, $1 FROM %s WHERE owner_id = 'owner-03'`, future)

	var got []OwnerSummary
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("more than 10 pages for 7 owners with limit 3")
		}
		p, err := f.store.Owners(ctx(t), OwnersRequest{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) > 3 {
			t.Fatalf("page of %d items, limit 3", len(p.Items))
		}
		got = append(got, p.Items...)
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if len(got) != len(want) {
		t.Fatalf("%d owners listed, want %d: %+v", len(got), len(want), got)
	}
	if !slices.IsSortedFunc(got, func(a, b OwnerSummary) int { return strings.Compare(a.Owner, b.Owner) }) {
		t.Fatalf("owners not in id order: %+v", got)
	}
	for _, o := range got {
		w := want[o.Owner]
		if o.Active != w[0] || o.Inactive != w[1] {
			t.Errorf("%s: active %d inactive %d, want %d %d", o.Owner, o.Active, o.Inactive, w[0], w[1])
		}
		if o.LastActivity.IsZero() || time.Since(o.LastActivity) > time.Hour {
			t.Errorf("%s: lastActivity %v is not recent", o.Owner, o.LastActivity)
		}
		if o.Owner == "owner-03" && !o.LastActivity.Equal(future) {
			t.Errorf("owner-03: lastActivity %v, want the read at %v", o.LastActivity, future)
		}
	}

	if _, err := f.store.EraseOwner(ctx(t), "owner-04"); err != nil {
		t.Fatal(err)
	}
	all, err := f.store.Owners(ctx(t), OwnersRequest{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 6 || all.NextCursor != "" || slices.ContainsFunc(all.Items, func(o OwnerSummary) bool { return o.Owner == "owner-04" }) {
		t.Fatalf("after erasing owner-04: %+v", all)
	}

	only, err := f.store.Owners(ctx(t), OwnersRequest{Only: "owner-02"})
	if err != nil {
		t.Fatal(err)
	}
	if len(only.Items) != 1 || only.Items[0].Owner != "owner-02" || only.Items[0].Active != 3 {
		t.Fatalf("Only owner-02: %+v", only)
	}
	none, err := f.store.Owners(ctx(t), OwnersRequest{Only: "owner-04"})
	if err != nil {
		t.Fatal(err)
	}
	if len(none.Items) != 0 {
		t.Fatalf("Only the erased owner-04: %+v", none)
	}
}

// TestOwnersBadInput: a limit out of range, a cursor that was not returned
// by a page and an invalid Only owner are validation errors naming the field.
func TestOwnersBadInput(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name  string
		req   OwnersRequest
		field string
	}{
		{"negative limit", OwnersRequest{Limit: -1}, "limit"},
		{"limit over 500", OwnersRequest{Limit: 501}, "limit"},
		{"cursor not base64", OwnersRequest{Cursor: "!!"}, "cursor"},
		{"cursor of a memory list", OwnersRequest{Cursor: core.EncodeCursor(time.Now(), "0190c3f2-7e9a-7b3c-9d4e-5f6a7b8c9d0e")}, "cursor"},
		{"cursor with a bad owner", OwnersRequest{Cursor: encodeOwnerCursor("no spaces allowed")}, "cursor"},
		{"bad only owner", OwnersRequest{Only: "bad owner"}, "owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.store.Owners(ctx(t), tc.req)
			v, ok := IsValidation(err)
			if !ok {
				t.Fatalf("err = %v, want a validation error", err)
			}
			if len(v.Fields) != 1 || v.Fields[0].Field != tc.field {
				t.Fatalf("fields %+v, want one for %s", v.Fields, tc.field)
			}
		})
	}
}
