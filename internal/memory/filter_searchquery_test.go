package memory

import "testing"

// TestSearchQueryOfAFilterIsTheOnePhaseQuery: the benchmark's raw side
// runs SearchQuery as "exactly what the store runs"; for a search with a
// filter that is the one-phase query (searchIn), not the owner-local
// first attempt the store skips.
func TestSearchQueryOfAFilterIsTheOnePhaseQuery(t *testing.T) {
	f := newFixture(t)
	vec := make([]float32, 384)
	vec[0] = 1
	for _, mode := range []SearchMode{SearchVector, SearchHybrid} {
		req := SearchRequest{Owner: "u1", Query: "x", Mode: mode, TopK: 5, Filter: parseFilter(t, `{"tags": {"eq": "a"}}`)}
		sql, _ := f.store.SearchQuery(req, vec)
		if want := (*reader)(f.store).buildSearch(mode, req, vec, 5, true); sql != want.sql {
			t.Errorf("%s: SearchQuery with a filter is\n%s\nwant the one-phase query\n%s", mode, sql, want.sql)
		}
	}
}
