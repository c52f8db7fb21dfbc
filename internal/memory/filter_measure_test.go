package memory

import (
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"
)

// TestMeasureFilteredSearch measures a selective filtered search with and
// without the GIN indexes of migration 17 (docs/api.md "Filters" has the
// figures). Run it by hand: ENGRAM_MEASURE_FILTERS=1 go test -run
// TestMeasureFilteredSearch -v ./internal/memory/. It asserts nothing about
// time (a test passes on a busy machine); it logs the medians.
func TestMeasureFilteredSearch(t *testing.T) {
	if os.Getenv("ENGRAM_MEASURE_FILTERS") != "1" {
		t.Skip("a measurement: set ENGRAM_MEASURE_FILTERS=1")
	}
	f := newFixture(t, withPolicy(func(p *Policy) { p.Limits.MaxMemoriesPerOwner = 2000 }))
	// 4 owners x 2,000 memories, metadata project p0..p99 (1 % each), tags t0..t9 (10 % each).
	f.exec(`INSERT INTO %s (id, owner_id, agent_id, session_id, source, category, content, importance, embedding, flags, metadata, tags)
		SELECT gen_random_uuid(), 'o' || (g %% 4), '', '', 'agent', 'contextual', 'memory number ' || g, 5,
			(SELECT array_agg(random() - 0.5 + 0 * d.i + 0 * g.g)::real[] FROM generate_series(1, 384) AS d(i))::vector, '{}',
			jsonb_build_object('project', 'p' || (g / 4 %% 100), 'n', g), ARRAY['t' || (g / 4 %% 10)]
		FROM generate_series(0, 7999) AS g`)
	f.exec(`ANALYZE %s`)
	rng := rand.New(rand.NewPCG(1, 2))
	vec := make([]float32, 384)
	for i := range vec {
		vec[i] = float32(rng.Float64() - 0.5)
	}
	filters := map[string]string{
		"metadata 1%": `{"metadata": {"key": "project", "eq": "p7"}}`,
		"tags 10%":    `{"tags": {"eq": "t3"}}`,
	}
	measure := func(label string) {
		for _, name := range []string{"none", "metadata 1%", "tags 10%"} {
			var flt *Filter
			if name != "none" {
				flt = parseFilter(t, filters[name])
			}
			for _, mode := range []SearchMode{SearchVector, SearchHybrid} {
				var d []time.Duration
				for range 40 {
					start := time.Now()
					hits, err := f.store.Search(ctx(t), SearchRequest{Owner: "o3", Query: "memory number", Vector: vec, Mode: mode, TopK: 10, Filter: flt})
					if err != nil || len(hits) != 10 {
						t.Fatalf("%s: %d hits, %v", name, len(hits), err)
					}
					d = append(d, time.Since(start))
				}
				slices.Sort(d)
				t.Logf("%-14s %-12s %-7s median %6.2f ms  p90 %6.2f ms", label, name, mode,
					float64(d[len(d)/2].Microseconds())/1000, float64(d[len(d)*9/10].Microseconds())/1000)
			}
		}
	}
	measure("with GIN")
	for _, idx := range []string{"memories_metadata_idx", "memories_tags_idx"} {
		if _, err := f.admin.Exec(ctx(t), `DROP INDEX `+f.store.core.Schema+`.`+idx); err != nil {
			t.Fatal(err)
		}
	}
	measure("without GIN")
}
