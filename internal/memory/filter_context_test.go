package memory

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// TestContextFilter: context takes the filter of search and list and
// renders only the memories it keeps, with and without a query, pinned
// categories included; another owner's memories stay out whatever the
// filter says, and Omitted counts only what the filter kept.
func TestContextFilter(t *testing.T) {
	f := newFixture(t)
	var travel, cheap []string
	for i := range 12 {
		tags := []string{"work"}
		if i%3 == 0 {
			tags = []string{"travel"}
		}
		r := f.add(AddRequest{Owner: "u1", Content: fmt.Sprintf("fact number %d about the trip plans", i),
			Tags: tags, Metadata: json.RawMessage(fmt.Sprintf(`{"price": %d}`, i*10))})
		if i%3 == 0 {
			travel = append(travel, r.Memory.ID)
		}
		if i*10 < 35 {
			cheap = append(cheap, r.Memory.ID)
		}
	}
	f.add(AddRequest{Owner: "u2", Content: "another owner's trip", Tags: []string{"travel"}, Metadata: json.RawMessage(`{"price": 1}`)})
	cases := []struct {
		filter string
		want   []string
	}{
		{`{"tags": {"eq": "travel"}}`, travel},
		{`{"metadata": {"key": "price", "lt": 35}}`, cheap},
		{`{"or": [{"tags": {"eq": "nowhere"}}, {"metadata": {"key": "price", "gt": 1000}}]}`, nil},
	}
	for _, c := range cases {
		for _, query := range []string{"", "trip plans"} {
			res, err := f.store.Context(ctx(t), ContextRequest{Owner: "u1", Query: query, Filter: parseFilter(t, c.filter)})
			if err != nil {
				t.Fatalf("context %s: %v", c.filter, err)
			}
			got := slices.Sorted(slices.Values(res.IDs))
			want := slices.Sorted(slices.Values(c.want))
			if !slices.Equal(got, want) {
				t.Errorf("context %s (query %q): %d memories %v, want %d", c.filter, query, len(got), got, len(want))
			}
			if res.Omitted != 0 {
				t.Errorf("context %s (query %q): omitted %d, want 0 (the budget fits all it keeps)", c.filter, query, res.Omitted)
			}
		}
	}
}
