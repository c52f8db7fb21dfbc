package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// TestBenchFiltersKeepTenPercent: each measured filter keeps exactly 10 %
// of an owner's memories (its Go twin, which the exact answer uses), and
// its JSON is a filter the engine's grammar reads strictly.
func TestBenchFiltersKeepTenPercent(t *testing.T) {
	h := &harness{corpus: newCorpus()}
	const perOwner = 1000
	for _, f := range benchFilters(perOwner) {
		var flt memory.Filter
		dec := json.NewDecoder(strings.NewReader(f.json))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&flt); err != nil {
			t.Errorf("%s: %v", f.json, err)
		}
		kept := 0
		for i := range perOwner {
			it := h.filterItem("owner-0000", i)
			if f.keep(filterFacts{bucket: float64(it.Metadata["bucket"]), n: float64(it.Metadata["n"]), tags: it.Tags}) {
				kept++
			}
		}
		if kept != perOwner/10 {
			t.Errorf("%s keeps %d of %d", f.json, kept, perOwner)
		}
	}
}

// TestFilteredRecallIsACheck: a filtered search that is not exact fails
// the run; a filter that makes search slower is reported only.
func TestFilteredRecallIsACheck(t *testing.T) {
	f := &FiltersReport{
		Recall: []FilterRecall{{Filter: "a", Queries: 10, Recall: 0.99, Min: 0.9}},
		Rows:   []FilterRow{{Name: "vector, no filter", VsUnfiltered: 1}, {Name: "vector, a", Filter: "a", VsUnfiltered: 0.8}},
	}
	ts := filterTargets(f)
	if len(ts) != 2 || !ts[0].Check || ts[0].Met || ts[1].Check || ts[1].Met {
		t.Fatalf("targets %+v: want a failed recall check and a missed (reported) throughput target", ts)
	}
}
