package memory

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFilterRanges: gt, gte, lt, lte on numeric and RFC 3339 metadata and
// on createdAt and updatedAt keep exactly the memories in range, in list,
// vector search and context; values of another kind (a string under a
// numeric range, text that is no timestamp, an impossible date, an absent
// key) do not match and never fail the query; not keeps the rest.
func TestFilterRanges(t *testing.T) {
	f := newFixture(t)
	// name -> metadata; the memory's own timestamps are set below.
	metas := []struct{ name, meta string }{
		{"n1", `{"n": 1}`},
		{"n5", `{"n": 5}`},
		{"n7.5", `{"n": 7.5}`},
		{"n10", `{"n": 10}`},
		{"nstr", `{"n": "7"}`},
		{"nbool", `{"n": true}`},
		{"nobj", `{"n": {"x": 7}}`},
		{"none", `{"other": 7}`},
		{"due-jan", `{"due": "2026-01-15T10:00:00Z"}`},
		{"due-mar", `{"due": "2026-03-01T00:00:00+01:00"}`},
		{"due-frac", `{"due": "2026-02-01t12:00:00.123456z"}`},
		{"due-bad", `{"due": "2026-02-30T00:00:00Z"}`},
		{"due-now", `{"due": "now"}`},
		{"due-date", `{"due": "2026-02-01"}`},
		{"due-num", `{"due": 20260201}`},
	}
	ids := map[string]string{}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, m := range metas {
		r := f.add(AddRequest{Owner: "u1", Content: "memory " + m.name, Metadata: json.RawMessage(m.meta)})
		ids[m.name] = r.Memory.ID
		// Memory i was created on day i and updated on day 2i.
		f.exec(`UPDATE %s SET created_at = $1, updated_at = $2 WHERE id = $3`,
			base.AddDate(0, 0, i), base.AddDate(0, 0, 2*i), r.Memory.ID)
	}
	// Another owner's memory in every range: never returned.
	f.add(AddRequest{Owner: "u2", Content: "memory of u2", Metadata: json.RawMessage(`{"n": 6, "due": "2026-02-01T00:00:00Z"}`)})
	cases := []struct {
		filter string
		want   []string
	}{
		{`{"metadata": {"key": "n", "gt": 5}}`, []string{"n7.5", "n10"}},
		{`{"metadata": {"key": "n", "gte": 5}}`, []string{"n5", "n7.5", "n10"}},
		{`{"metadata": {"key": "n", "lt": 5.0}}`, []string{"n1"}},
		{`{"metadata": {"key": "n", "lte": 7.5}}`, []string{"n1", "n5", "n7.5"}},
		{`{"metadata": {"key": "n", "gt": 1, "lt": 10}}`, []string{"n5", "n7.5"}},
		{`{"metadata": {"key": "n", "gte": -1e3, "lte": 1e1}}`, []string{"n1", "n5", "n7.5", "n10"}},
		{`{"not": {"metadata": {"key": "n", "gte": 5}}}`, []string{"n1", "nstr", "nbool", "nobj", "none",
			"due-jan", "due-mar", "due-frac", "due-bad", "due-now", "due-date", "due-num"}},
		{`{"metadata": {"key": "due", "gte": "2026-01-20T00:00:00Z"}}`, []string{"due-mar", "due-frac"}},
		{`{"metadata": {"key": "due", "lt": "2026-02-01T12:00:00.2Z"}}`, []string{"due-jan", "due-frac"}},
		// 2026-03-01T00:00:00+01:00 is 2026-02-28T23:00:00Z.
		{`{"metadata": {"key": "due", "gt": "2026-02-01T12:00:00Z", "lte": "2026-02-28T23:00:00Z"}}`, []string{"due-mar", "due-frac"}},
		{`{"metadata": {"key": "due", "gt": 0}}`, []string{"due-num"}},
		{`{"createdAt": {"gte": "2026-01-03T00:00:00Z", "lt": "2026-01-05T00:00:00Z"}}`, []string{"n7.5", "n10"}},
		{`{"updatedAt": {"gt": "2026-01-22T00:00:00+00:00"}}`, []string{"due-bad", "due-now", "due-date", "due-num"}},
		{`{"and": [{"createdAt": {"lte": "2026-01-04T00:00:00Z"}}, {"metadata": {"key": "n", "gt": 4}}]}`, []string{"n5", "n7.5", "n10"}},
		{`{"or": [{"metadata": {"key": "n", "lt": 2}}, {"metadata": {"key": "due", "lt": "2026-01-16T00:00:00Z"}}]}`, []string{"n1", "due-jan"}},
	}
	for _, c := range cases {
		flt := parseFilter(t, c.filter)
		want := make([]string, len(c.want))
		for i, n := range c.want {
			want[i] = ids[n]
		}
		slices.Sort(want)
		page, err := f.store.List(ctx(t), ListRequest{Owner: "u1", Filter: flt, Limit: 100})
		if err != nil {
			t.Fatalf("list %s: %v", c.filter, err)
		}
		if got := memoryIDs(page.Items); !slices.Equal(got, want) {
			t.Errorf("list %s: %v, want %v", c.filter, names(ids, got), c.want)
		}
		for _, mode := range []SearchMode{SearchVector, SearchHybrid, SearchText} {
			hits, err := f.store.Search(ctx(t), SearchRequest{Owner: "u1", Query: "memory", Mode: mode, TopK: 50, Filter: flt})
			if err != nil {
				t.Fatalf("%s search %s: %v", mode, c.filter, err)
			}
			got := make([]string, len(hits))
			for i, h := range hits {
				got[i] = h.Memory.ID
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("%s search %s: %v, want %v", mode, c.filter, names(ids, got), c.want)
			}
		}
	}
}

func names(ids map[string]string, got []string) []string {
	out := make([]string, 0, len(got))
	for _, id := range got {
		for n, v := range ids {
			if v == id {
				out = append(out, n)
			}
		}
	}
	return out
}

// TestFilterRangeRefusals: bounds that are not numbers or RFC 3339
// timestamps, mixed kinds, two lower bounds, ranges on tags and operators
// on timestamps other than ranges are 422 naming the part; nothing runs.
func TestFilterRangeRefusals(t *testing.T) {
	f := newFixture(t)
	cases := []struct{ filter, field, want string }{
		{`{"and": [{"tags": {"eq": "a"}}, {"metadata": {"key": "n", "gt": true}}]}`, "filter.and[1].metadata.gt", "number or an RFC 3339 timestamp"},
		{`{"metadata": {"key": "n", "gte": "yesterday"}}`, "filter.metadata.gte", "number or an RFC 3339 timestamp"},
		{`{"metadata": {"key": "n", "lt": "2026-01-01"}}`, "filter.metadata.lt", "number or an RFC 3339 timestamp"},
		{`{"metadata": {"key": "n", "lte": "5"}}`, "filter.metadata.lte", "number or an RFC 3339 timestamp"},
		{`{"metadata": {"key": "n", "gt": [1]}}`, "filter.metadata.gt", "number or an RFC 3339 timestamp"},
		{`{"metadata": {"key": "n", "gt": 1, "lt": "2026-01-01T00:00:00Z"}}`, "filter.metadata.lt", "must be a number like gt's bound"},
		{`{"metadata": {"key": "n", "gt": "2026-01-01T00:00:00Z", "lt": 3}}`, "filter.metadata.lt", "RFC 3339 timestamp"},
		{`{"metadata": {"key": "n", "gt": 1e999}}`, "filter.metadata.gt", "number or an RFC 3339 timestamp"},
		{`{"metadata": {"key": "n", "gt": 1e-20000}}`, "filter.metadata.gt", "number or an RFC 3339 timestamp"},
		{`{"metadata": {"key": "n", "gt": 0e-20000}}`, "filter.metadata.gt", "number or an RFC 3339 timestamp"},
		{`{"metadata": {"key": "n", "gt": 1, "gte": 2}}`, "filter.metadata", "both gt and gte"},
		{`{"metadata": {"key": "n", "lt": 1, "lte": 2}}`, "filter.metadata", "both lt and lte"},
		{`{"metadata": {"key": "n", "eq": 1, "lt": 2}}`, "filter.metadata", "exactly one of eq, in, exists, or a range"},
		{`{"metadata": {"key": "", "gt": 1}}`, "filter.metadata.key", "metadata key of 1 to 128 bytes"},
		{`{"tags": {"gt": "a"}}`, "filter.tags", "tags have not"},
		{`{"createdAt": {"gt": "2026-13-01T00:00:00Z"}}`, "filter.createdAt.gt", "RFC 3339 timestamp"},
		{`{"createdAt": {"gt": 1767225600}}`, "filter.createdAt.gt", "RFC 3339 timestamp"},
		{`{"not": {"updatedAt": {"lt": "2026-01-01 00:00:00"}}}`, "filter.not.updatedAt.lt", "RFC 3339 timestamp"},
		{`{"createdAt": {"eq": "2026-01-01T00:00:00Z"}}`, "filter.createdAt", "must be a range"},
		{`{"updatedAt": {}}`, "filter.updatedAt", "must be a range"},
		{`{"createdAt": {"key": "k", "gt": "2026-01-01T00:00:00Z"}}`, "filter.createdAt.key", "the memory's own timestamp"},
		{`{"createdAt": {"gt": "2026-01-01T00:00:00Z", "gte": "2026-01-01T00:00:00Z"}}`, "filter.createdAt", "both gt and gte"},
		{`{"createdAt": {"gt": "2026-01-01T00:00:00Z"}, "tags": {"eq": "a"}}`, "filter", "(has 2)"},
	}
	for _, c := range cases {
		refusesFilter(t, f, c.filter, c.field, c.want, true)
	}
	// The equality filter's numbers are held to what jsonb takes too: a
	// number that underflows numeric was a 500.
	_, err := f.store.List(ctx(t), ListRequest{Owner: "u1", Filter: parseFilter(t, `{"metadata": {"key": "n", "eq": 1e-20000}}`)})
	if msg := fieldError(t, err, "filter.metadata.eq"); !strings.Contains(msg, "string, number or boolean") {
		t.Errorf("eq 1e-20000: %q", msg)
	}
}
