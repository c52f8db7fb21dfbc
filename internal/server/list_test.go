package server

import (
	"slices"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// TestListHidesExpired: a memory past its expiry that the expire job has
// not deactivated yet is not listed by default, as search and context do
// not return it; include=expired (or inactive) lists it.
func TestListHidesExpired(t *testing.T) {
	tn, srv := newServedTenant(t)
	const owner = "erin"
	var kept, expired memory.AddResult
	srv.do(t, req{method: "POST", path: memPath(owner, "memories"), body: map[string]any{"content": "Erin likes long walks"}}).want(t, 201).decode(t, &kept)
	srv.do(t, req{method: "POST", path: memPath(owner, "memories"), body: map[string]any{"content": "Erin has a train at noon", "ttl": "1h"}}).want(t, 201).decode(t, &expired)
	if _, err := tn.admin.Exec(testCtx(t), `UPDATE `+tn.schema+`.memories SET expires_at = now() - interval '1 minute' WHERE id = $1`, expired.Memory.ID); err != nil {
		t.Fatal(err)
	}
	list := func(query string) []string {
		t.Helper()
		var page memory.ListPage
		srv.do(t, req{method: "GET", path: memPath(owner, "memories") + query}).want(t, 200).decode(t, &page)
		var ids []string
		for _, m := range page.Items {
			ids = append(ids, m.ID)
		}
		return ids
	}
	if ids := list(""); !slices.Equal(ids, []string{kept.Memory.ID}) {
		t.Fatalf("default list = %v, want only the unexpired %s", ids, kept.Memory.ID)
	}
	for _, q := range []string{"?include=expired", "?include=inactive", "?include=expired,inactive", "?includeInactive=true"} {
		if ids := list(q); len(ids) != 2 || !slices.Contains(ids, expired.Memory.ID) {
			t.Fatalf("list%s = %v, want both memories", q, ids)
		}
	}
	p := srv.do(t, req{method: "GET", path: memPath(owner, "memories") + "?include=deleted"}).want(t, 422).problem(t)
	if !hasField(p, "include") {
		t.Fatalf("include=deleted: %+v", p)
	}
}
