package memory

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

func parseFilter(t *testing.T, js string) *Filter {
	t.Helper()
	var f Filter
	d := json.NewDecoder(strings.NewReader(js))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return &f
}

// refusesFilter checks that owner u1's search, list and (withContext)
// context refuse filter with a field error at field whose message holds
// want.
func refusesFilter(t *testing.T, f *fixture, filter, field, want string, withContext bool) {
	t.Helper()
	flt := parseFilter(t, filter)
	_, err := f.store.Search(ctx(t), SearchRequest{Owner: "u1", Query: "x", Filter: flt})
	if msg := fieldError(t, err, field); !strings.Contains(msg, want) {
		t.Errorf("search %s: %q, want %q", filter, msg, want)
	}
	_, err = f.store.List(ctx(t), ListRequest{Owner: "u1", Filter: flt})
	if msg := fieldError(t, err, field); !strings.Contains(msg, want) {
		t.Errorf("list %s: %q, want %q", filter, msg, want)
	}
	if !withContext {
		return
	}
	_, err = f.store.Context(ctx(t), ContextRequest{Owner: "u1", Filter: flt})
	if msg := fieldError(t, err, field); !strings.Contains(msg, want) {
		t.Errorf("context %s: %q, want %q", filter, msg, want)
	}
}

func TestFilterRefusals(t *testing.T) {
	f := newFixture(t)
	in51 := `[` + strings.Repeat(`"a",`, 50) + `"a"]`
	deep := `{"not": {"not": {"not": {"not": {"not": {"tags": {"exists": true}}}}}}}`
	many := `{"or": [` + strings.TrimSuffix(strings.Repeat(`{"tags": {"eq": "a"}},`, 33), ",") + `]}`
	cases := []struct{ filter, field, want string }{
		{`{}`, "filter", "exactly one of and, or, not, metadata, tags, createdAt, updatedAt (has 0)"},
		{`{"tags": {"eq": "a"}, "metadata": {"key": "k", "exists": true}}`, "filter", "(has 2)"},
		{`{"and": []}`, "filter.and", "must not be empty"},
		{`{"and": [{"tags": {"eq": "a"}}, {"metadata": {"key": "", "eq": 1}}]}`, "filter.and[1].metadata.key", "metadata key of 1 to 128 bytes"},
		{`{"metadata": {"key": "k"}}`, "filter.metadata", "exactly one of eq, in, exists"},
		{`{"metadata": {"key": "k", "eq": 1, "exists": true}}`, "filter.metadata", "exactly one of eq, in, exists"},
		{`{"metadata": {"key": "k", "eq": {"a": 1}}}`, "filter.metadata.eq", "string, number or boolean"},
		{`{"metadata": {"key": "k", "in": [1, [2]]}}`, "filter.metadata.in[1]", "string, number or boolean"},
		// Issue 26's sixteenth review, LOW: a number jsonb cannot hold was a 500.
		{`{"metadata": {"key": "k", "eq": 1e999999}}`, "filter.metadata.eq", "string, number or boolean"},
		{`{"metadata": {"key": "k", "eq": -1e-400000}}`, "filter.metadata.eq", "string, number or boolean"},
		{`{"metadata": {"key": "k", "in": [1, 0e-9000]}}`, "filter.metadata.in[1]", "string, number or boolean"},
		{`{"metadata": {"key": "k", "in": []}}`, "filter.metadata.in", "1 to 50 values"},
		{`{"metadata": {"key": "k", "in": ` + in51 + `}}`, "filter.metadata.in", "1 to 50 values"},
		{`{"metadata": {"key": "k", "eq": "a\u0000"}}`, "filter.metadata.eq", "string, number or boolean"},
		{`{"tags": {"key": "k", "eq": "a"}}`, "filter.tags.key", "is for metadata conditions"},
		{`{"tags": {"eq": 3}}`, "filter.tags.eq", "must be a tag"},
		// Issue 26's eighteenth review, LOW: NUL in a tag was a 500.
		{`{"tags": {"eq": "a\u0000"}}`, "filter.tags.eq", "must be a tag"},
		{`{"or": [{"tags": {"eq": "a"}}, {"tags": {"in": ["b", ""]}}]}`, "filter.or[1].tags.in[1]", "must be a tag"},
		{deep, "filter.not.not.not.not", "deeper than the limit of 4 levels"},
		{many, "filter.or[32].tags", "more than the limit of 32"},
	}
	for _, c := range cases {
		refusesFilter(t, f, c.filter, c.field, c.want, false)
	}
}

// filterRow is a memory of the filter tests with what it was given.
type filterRow struct {
	id   string
	vec  []float32
	meta map[string]any
	tags []string
}

// TestFilteredSearchIsExact: a filtered search returns the exact top-K of
// the memories the filter keeps (computed here from the vectors the test
// sent), in vector and hybrid mode, whatever the filter's selectivity, and
// list returns exactly the memories it keeps.
func TestFilteredSearchIsExact(t *testing.T) {
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(31, 31))
	var rows []filterRow
	for i := range 90 {
		v := make([]float32, 384)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		meta := map[string]any{"project": fmt.Sprintf("p%d", i%9), "n": i % 7}
		if i%5 == 0 {
			meta["archived"] = true
		}
		tags := []string{fmt.Sprintf("t%d", i%4)}
		if i%3 == 0 {
			tags = append(tags, "three")
		}
		js, _ := json.Marshal(meta)
		r := f.add(AddRequest{Owner: "u1", Content: fmt.Sprintf("memory number %d about topic %d", i, i%9), Embedding: v, Metadata: js, Tags: tags})
		rows = append(rows, filterRow{id: r.Memory.ID, vec: v, meta: meta, tags: tags})
	}
	// Another owner with the same labels: never returned.
	f.add(AddRequest{Owner: "u2", Content: "memory of another owner", Embedding: rows[3].vec, Metadata: json.RawMessage(`{"project": "p3"}`), Tags: []string{"t3"}})
	has := func(tags []string, t string) bool { return slices.Contains(tags, t) }
	cases := []struct {
		filter string
		keep   func(r filterRow) bool
	}{
		{`{"metadata": {"key": "project", "eq": "p3"}}`, func(r filterRow) bool { return r.meta["project"] == "p3" }},
		{`{"metadata": {"key": "n", "in": [1, 2.0]}}`, func(r filterRow) bool { n := r.meta["n"].(int); return n == 1 || n == 2 }},
		{`{"metadata": {"key": "archived", "exists": true}}`, func(r filterRow) bool { _, ok := r.meta["archived"]; return ok }},
		{`{"not": {"metadata": {"key": "archived", "exists": true}}}`, func(r filterRow) bool { _, ok := r.meta["archived"]; return !ok }},
		{`{"tags": {"eq": "three"}}`, func(r filterRow) bool { return has(r.tags, "three") }},
		{`{"tags": {"in": ["t1", "t2"]}}`, func(r filterRow) bool { return has(r.tags, "t1") || has(r.tags, "t2") }},
		{`{"and": [{"tags": {"eq": "three"}}, {"or": [{"metadata": {"key": "project", "eq": "p0"}}, {"metadata": {"key": "n", "eq": 4}}]}]}`,
			func(r filterRow) bool { return has(r.tags, "three") && (r.meta["project"] == "p0" || r.meta["n"] == 4) }},
		{`{"metadata": {"key": "project", "eq": "nowhere"}}`, func(filterRow) bool { return false }},
	}
	query := rows[0].vec // a row most filters leave out: its neighbours are not the answer
	for _, c := range cases {
		flt := parseFilter(t, c.filter)
		var want []filterRow
		for _, r := range rows {
			if c.keep(r) {
				want = append(want, r)
			}
		}
		page, err := f.store.List(ctx(t), ListRequest{Owner: "u1", Filter: flt, Limit: 500})
		if err != nil {
			t.Fatalf("list %s: %v", c.filter, err)
		}
		exp := rowIDs(want)
		slices.Sort(exp)
		if got := memoryIDs(page.Items); !slices.Equal(got, exp) {
			t.Errorf("list %s: %d memories, want %d", c.filter, len(got), len(exp))
		}
		sort.SliceStable(want, func(i, j int) bool { return cos(want[i].vec, query) > cos(want[j].vec, query) })
		exact := rowIDs(want[:min(5, len(want))])
		hits, err := f.store.Search(ctx(t), SearchRequest{Owner: "u1", Vector: query, Mode: SearchVector, TopK: 5, Filter: flt})
		if err != nil {
			t.Fatalf("search %s: %v", c.filter, err)
		}
		got := make([]string, len(hits))
		for i, h := range hits {
			got[i] = h.Memory.ID
		}
		if !slices.Equal(got, exact) {
			t.Errorf("vector search %s: %v, want the exact %v", c.filter, got, exact)
		}
		// Hybrid: the filtered top 5 is the unfiltered ranking's first 5
		// that the filter keeps (90 rows: the unfiltered answer holds all).
		all, err := f.store.Search(ctx(t), SearchRequest{Owner: "u1", Query: "memory topic 3", Vector: query, Mode: SearchHybrid, TopK: 100})
		if err != nil {
			t.Fatal(err)
		}
		kept := map[string]bool{}
		for _, r := range want {
			kept[r.id] = true
		}
		exp = exp[:0]
		for _, h := range all {
			if kept[h.Memory.ID] && len(exp) < 5 {
				exp = append(exp, h.Memory.ID)
			}
		}
		hyb, err := f.store.Search(ctx(t), SearchRequest{Owner: "u1", Query: "memory topic 3", Vector: query, Mode: SearchHybrid, TopK: 5, Filter: flt})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, h := range hyb {
			got = append(got, h.Memory.ID)
		}
		if !slices.Equal(got, exp) {
			t.Errorf("hybrid search %s: %v, want %v", c.filter, got, exp)
		}
	}
}

func memoryIDs(ms []Memory) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	slices.Sort(out)
	return out
}

func rowIDs(rs []filterRow) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.id
	}
	return out
}

// TestFilterLoneSurrogateMatchesAsStored (issue 26, eighteenth review,
// LOW): a lone surrogate escape in a filter's value was sent to jsonb as
// written and PostgreSQL refused it (a 500). Decoded, it is U+FFFD, as
// metadata stores it, so the filter finds the memory.
func TestFilterLoneSurrogateMatchesAsStored(t *testing.T) {
	f := newFixture(t)
	r := f.add(AddRequest{Owner: "u1", Content: "a surrogate", Metadata: json.RawMessage(`{"k": "x\ud800"}`)})
	flt := parseFilter(t, `{"metadata": {"key": "k", "eq": "x\ud800"}}`)
	got, err := f.store.List(ctx(t), ListRequest{Owner: "u1", Filter: flt})
	if err != nil || len(got.Items) != 1 || got.Items[0].ID != r.Memory.ID {
		t.Fatalf("list by a lone surrogate: %+v, %v", got, err)
	}
	if _, err := f.store.Search(ctx(t), SearchRequest{Owner: "u1", Query: "surrogate", Filter: flt}); err != nil {
		t.Fatalf("search by a lone surrogate: %v", err)
	}
}
