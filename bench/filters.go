package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory"
)

// The filters part (--parts=filters, issue 31): owners whose memories carry
// metadata and tags, searched with filters that each keep 10 % of an
// owner's memories. It checks that a filtered search is exact (recall@10
// against the exact answer over the memories the filter keeps, computed
// here in Go: it must be 1.0) and measures filtered search beside
// unfiltered search in the same alternating slices, through the service
// and as the engine's own SQL through pgx, with the CPU each costs.

// FiltersReport is the filters part of the results.
type FiltersReport struct {
	Owners   int       `json:"owners"`
	PerOwner int       `json:"perOwner"`
	Load     LoadStats `json:"load"`
	// Recall is, per filter, vector search through the service against
	// the exact top-10 of the memories the filter keeps.
	Recall []FilterRecall `json:"recall"`
	// Rows are the measured searches at concurrency 1, unfiltered first.
	Rows []FilterRow `json:"rows"`
}

// FilterRecall is the recall of one filter.
type FilterRecall struct {
	Filter  string  `json:"filter"`
	Kept    float64 `json:"kept"` // share of an owner's memories the filter keeps (mean over the queries' owners)
	Queries int     `json:"queries"`
	Recall  float64 `json:"recallAt10"`
	Min     float64 `json:"minRecall"`
}

// FilterRow is one search kind (mode and filter), service and raw.
type FilterRow struct {
	Name    string   `json:"name"`
	Filter  string   `json:"filter,omitempty"`
	Service RunStats `json:"service"`
	Raw     RunStats `json:"raw"`
	// Ratio is service throughput / raw throughput.
	Ratio float64 `json:"ratio"`
	// VsUnfiltered is service throughput / the unfiltered search's of the
	// same mode (above 1: the filter makes search faster).
	VsUnfiltered float64 `json:"vsUnfiltered"`
	// ServiceCPU is the service process and its database's backends per
	// operation; RawCPU the database's backends.
	ServiceCPU CPUPerOp `json:"serviceCpu"`
	RawCPU     CPUPerOp `json:"rawCpu"`
}

// filterBuckets: bucket and tag b<k> each hold one memory in filterBuckets.
const filterBuckets = 10

// benchFilter is one measured filter: its JSON and the same test in Go.
type benchFilter struct {
	name string
	json string
	keep func(filterFacts) bool
}

// filterFacts are what the filters test of one memory.
type filterFacts struct {
	bucket, n float64
	tags      []string
}

// benchFilters keep 10 % of an owner of perOwner memories each.
func benchFilters(perOwner int) []benchFilter {
	lo, hi := perOwner*3/10, perOwner*4/10
	return []benchFilter{
		{"metadata eq", `{"metadata": {"key": "bucket", "eq": 3}}`, func(f filterFacts) bool { return f.bucket == 3 }},
		{"tags eq", `{"tags": {"eq": "b7"}}`, func(f filterFacts) bool { return slices.Contains(f.tags, "b7") }},
		{"metadata range", fmt.Sprintf(`{"metadata": {"key": "n", "gte": %d, "lt": %d}}`, lo, hi),
			func(f filterFacts) bool { return f.n >= float64(lo) && f.n < float64(hi) }},
	}
}

// filterItem is a memory of the part: the corpus's text with labels.
type filterItem struct {
	item
	Metadata map[string]int `json:"metadata"`
	Tags     []string       `json:"tags"`
}

func (h *harness) filterItem(owner string, i int) filterItem {
	return filterItem{item: h.corpus.stored(owner, i), Metadata: map[string]int{"bucket": i % filterBuckets, "n": i},
		Tags: []string{fmt.Sprintf("b%d", i%filterBuckets)}}
}

func (h *harness) runFilters(ctx context.Context) (*FiltersReport, error) {
	sc := h.scale
	rep := &FiltersReport{Owners: sc.FilterOwners, PerOwner: sc.PerOwner}
	tenant, stop, err := h.serveTenant(ctx, "flt", "filters database", "filters")
	defer stop()
	if err != nil {
		return nil, err
	}
	db, loginURL, svc, policy := tenant.db, tenant.loginURL, tenant.svc, benchPolicy()
	h.logf("filters: loading %d owners x %d memories with metadata and tags", sc.FilterOwners, sc.PerOwner)
	if rep.Load, err = h.loadFiltered(ctx, svc.api); err != nil {
		return nil, err
	}
	if err := settleTable(ctx, db.URL, benchSchema); err != nil {
		return nil, err
	}
	pool, err := h.servicePool(ctx, loginURL, memory.SessionSettings{})
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	raw, err := newBuiltinRawSQL(pool, policy)
	if err != nil {
		return nil, err
	}
	defer raw.close()
	filters := benchFilters(sc.PerOwner)
	if rep.Recall, err = h.filterRecall(ctx, svc.api, raw, filters); err != nil {
		return nil, err
	}
	for _, r := range rep.Recall {
		h.logf("filters: %s keeps %.1f %%: recall@10 %.4f (min %.2f) over %d queries", r.Filter, 100*r.Kept, r.Recall, r.Min, r.Queries)
	}
	rep.Rows = h.measureFilters(ctx, svc, db, raw, filters)
	return rep, nil
}

// loadFiltered writes every memory through the batch API, owners
// interleaved like the service part's load.
func (h *harness) loadFiltered(ctx context.Context, api *apiClient) (LoadStats, error) {
	st := LoadStats{BatchSize: loadBatch, Concurrency: 1, Actions: map[string]int{}}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(h.scale.FilterOwners*h.scale.PerOwner/20+60)*time.Second)
	defer cancel()
	start := time.Now()
	for from := 0; from < h.scale.PerOwner; from += loadBatch {
		for o := range h.scale.FilterOwners {
			owner := ownerName(o)
			items := make([]filterItem, 0, loadBatch)
			for i := from; i < min(from+loadBatch, h.scale.PerOwner); i++ {
				items = append(items, h.filterItem(owner, i))
			}
			var res apiBatchResult
			if err := api.post(ctx, ownerPath(owner, "/memories/batch"), map[string]any{"items": items}, &res); err != nil {
				return st, fmt.Errorf("loading %s: %w", owner, err)
			}
			st.Requests++
			for _, r := range res.Results {
				st.Actions[r.Action]++
				st.Items++
			}
		}
	}
	st.ElapsedSec = round3(time.Since(start).Seconds())
	st.ItemsPerSec = round3(float64(st.Items) / time.Since(start).Seconds())
	return st, nil
}

// filterRow is an owner's active memory with what the filters test.
type filterRow struct {
	id    string
	vec   []float32
	facts filterFacts
}

func filterRows(ctx context.Context, pool *pgxpool.Pool, memories, owner string) ([]filterRow, error) {
	rows, err := pool.Query(ctx, `SELECT id::text, embedding, metadata, tags FROM `+memories+`
		WHERE owner_id = $1 AND active AND (expires_at IS NULL OR expires_at > now())`, owner)
	if err != nil {
		return nil, fmt.Errorf("reading %s for the exact answer: %w", owner, err)
	}
	defer rows.Close()
	var out []filterRow
	for rows.Next() {
		var (
			r    filterRow
			v    pgv.Vector
			meta []byte
		)
		if err := rows.Scan(&r.id, &v, &meta, &r.facts.tags); err != nil {
			return nil, err
		}
		var m struct{ Bucket, N float64 }
		if err := json.Unmarshal(meta, &m); err != nil {
			return nil, fmt.Errorf("metadata of %s: %w", r.id, err)
		}
		r.vec, r.facts.bucket, r.facts.n = v.Slice(), m.Bucket, m.N
		out = append(out, r)
	}
	return out, rows.Err()
}

// filterRecall runs vector searches with each filter through the service
// and compares them with the exact top-10 of the rows the filter keeps.
func (h *harness) filterRecall(ctx context.Context, api *apiClient, raw *rawSQL, filters []benchFilter) ([]FilterRecall, error) {
	perFilter := max(1, min(h.scale.RecallQueries/len(filters), 100))
	out := make([]FilterRecall, len(filters))
	for i, f := range filters {
		out[i] = FilterRecall{Filter: f.json, Min: 1}
	}
	rng := rand.New(rand.NewPCG(31, 10))
	sums, kept := make([]float64, len(filters)), make([]float64, len(filters))
	cache := map[string][]filterRow{}
	for q := range perFilter {
		owner := ownerName(q % h.scale.FilterOwners)
		rows, ok := cache[owner]
		if !ok {
			var err error
			if rows, err = filterRows(ctx, raw.pool, raw.memories, owner); err != nil {
				return nil, err
			}
			cache[owner] = rows
		}
		text := h.corpus.query(rng, owner, rng.IntN(h.scale.PerOwner))
		vec, err := raw.embed(ctx, text)
		if err != nil {
			return nil, err
		}
		for i, f := range filters {
			r, share, err := filteredRecallOne(ctx, api, owner, text, f, vec, rows)
			if err != nil {
				return nil, err
			}
			sums[i] += r
			kept[i] += share
			out[i].Min = math.Min(out[i].Min, r)
			out[i].Queries++
		}
	}
	for i := range out {
		out[i].Recall = round3(sums[i] / float64(out[i].Queries))
		out[i].Kept = round3(kept[i] / float64(out[i].Queries))
	}
	return out, nil
}

// filteredRecallOne is one filtered vector search against the exact
// answer, and the share of rows the filter keeps.
func filteredRecallOne(ctx context.Context, api *apiClient, owner, text string, f benchFilter, vec []float32, rows []filterRow) (float64, float64, error) {
	var dists []float64
	dist := map[string]float64{}
	for _, r := range rows {
		if f.keep(r.facts) {
			d := cosineDistance(vec, r.vec)
			dist[r.id] = d
			dists = append(dists, d)
		}
	}
	share := float64(len(dists)) / float64(max(1, len(rows)))
	sort.Float64s(dists)
	want := min(topK, len(dists))
	var res apiSearchResult
	body := map[string]any{"query": text, "mode": "vector", "topK": topK, "filter": json.RawMessage(f.json)}
	if err := api.post(ctx, ownerPath(owner, "/search"), body, &res); err != nil {
		return 0, 0, err
	}
	if want == 0 {
		return 1, share, nil
	}
	hit := 0
	for _, r := range res.Results {
		// A result the filter does not keep is no hit (dist has no entry).
		if d, ok := dist[r.Memory.ID]; ok && d <= dists[want-1]+tieTolerance {
			hit++
		}
	}
	return float64(min(hit, want)) / float64(want), share, nil
}

// measureFilters measures each search kind through the service and as
// the engine's SQL, every side in the same alternating slices at
// concurrency 1, with the CPU of its processes.
func (h *harness) measureFilters(ctx context.Context, svc *benchService, db *benchDB, raw *rawSQL, filters []benchFilter) []FilterRow {
	sc := h.scale
	type kind struct {
		name, mode string
		filter     *benchFilter
	}
	kinds := []kind{{name: "vector, no filter", mode: "vector"}}
	for i := range filters {
		kinds = append(kinds, kind{name: "vector, " + filters[i].name + " (10 %)", mode: "vector", filter: &filters[i]})
	}
	kinds = append(kinds, kind{name: "hybrid, no filter", mode: "hybrid"}, kind{name: "hybrid, metadata eq (10 %)", mode: "hybrid", filter: &filters[0]})
	svcMeter := cpuMeter{servicePID: svc.proc.pid(), database: db.name}
	rawMeter := cpuMeter{database: db.name}
	var sides []meteredSide
	for i, k := range kinds {
		var flt *memory.Filter
		var body json.RawMessage
		if k.filter != nil {
			body = json.RawMessage(k.filter.json)
			flt = &memory.Filter{}
			_ = json.Unmarshal(body, flt) // the part's own constants
		}
		pick := func(rng *rand.Rand) (string, string) {
			owner := ownerName(rng.IntN(sc.FilterOwners))
			return owner, h.corpus.query(rng, owner, rng.IntN(sc.PerOwner))
		}
		sr, rr := rngs(1, uint64(100+i)), rngs(1, uint64(200+i))
		service := func(ctx context.Context, _ int) error {
			owner, q := pick(sr[0])
			req := map[string]any{"query": q, "mode": k.mode, "topK": topK}
			if body != nil {
				req["filter"] = body
			}
			var res apiSearchResult
			if err := svc.api.post(ctx, ownerPath(owner, "/search"), req, &res); err != nil {
				return err
			}
			return expectRows(len(res.Results), topK)
		}
		rawOp := func(ctx context.Context, _ int) error {
			owner, q := pick(rr[0])
			vec, err := raw.embed(ctx, q)
			if err != nil {
				return err
			}
			sql, args := raw.engine.SearchQuery(memory.SearchRequest{Owner: owner, Query: q, Mode: memory.SearchMode(k.mode), TopK: topK, Filter: flt}, vec)
			n, err := raw.run(ctx, sql, args)
			if err != nil {
				return err
			}
			return expectRows(n, topK)
		}
		sides = append(sides, meteredSide{op: service, meter: svcMeter}, meteredSide{op: rawOp, meter: rawMeter})
	}
	res := meteredRuns(ctx, 1, sc.RunDuration, sc.Rounds, sc.MaxOpsPerRun, sides...)
	rows := make([]FilterRow, len(kinds))
	for i, k := range kinds {
		s, r := res[2*i], res[2*i+1]
		rows[i] = FilterRow{Name: k.name, Service: s.stats, Raw: r.stats, Ratio: ratio(s.stats.Throughput, r.stats.Throughput),
			ServiceCPU: s.cpu, RawCPU: r.cpu}
		if k.filter != nil {
			rows[i].Filter = k.filter.json
		}
	}
	for i, k := range kinds {
		for j := range kinds {
			if kinds[j].mode == k.mode && kinds[j].filter == nil {
				rows[i].VsUnfiltered = ratio(rows[i].Service.Throughput, rows[j].Service.Throughput)
			}
		}
		r := rows[i]
		h.logf("filters: %-30s service %7.1f/s p50 %6.2fms p99 %6.2fms cpu %.2fms/op | raw %7.1f/s p99 %6.2fms | service/raw %.2f | vs unfiltered %.2f | load %s",
			r.Name, r.Service.Throughput, r.Service.Latency.P50, r.Service.Latency.P99, r.ServiceCPU.TotalMs(),
			r.Raw.Throughput, r.Raw.Latency.P99, r.Ratio, r.VsUnfiltered, loadAvg())
	}
	return rows
}

func filtersMarkdown(p printer, f *FiltersReport) {
	p("## Filtered search\n\n")
	p("%d owners x %d memories with metadata `{\"bucket\": i %% 10, \"n\": i}` and tag `b<i %% 10>`, loaded through the batch API "+
		"(owners interleaved); each filter keeps 10 %% of an owner's memories.\n\n", f.Owners, f.PerOwner)
	p("| filter | kept | queries | recall@10 vs the exact filtered answer | min |\n|---|---|---|---|---|\n")
	for _, r := range f.Recall {
		p("| `%s` | %.1f %% | %d | %.4f | %.2f |\n", r.Filter, 100*r.Kept, r.Queries, r.Recall, r.Min)
	}
	p("\nTop 10, concurrency 1, all rows measured in the same alternating slices. CPU per operation: the service process and " +
		"its database backends (service), the backends (raw: the engine's own SQL through pgx).\n\n")
	p("| search | service ops/s | p50 ms | p99 ms | CPU ms/op | raw ops/s | raw p99 ms | raw CPU ms/op | service/raw | vs unfiltered |\n")
	p("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range f.Rows {
		p("| %s | %.1f | %.2f | %.2f | %.2f | %.1f | %.2f | %.2f | %.2f | %.2f |\n", r.Name, r.Service.Throughput, r.Service.Latency.P50,
			r.Service.Latency.P99, r.ServiceCPU.TotalMs(), r.Raw.Throughput, r.Raw.Latency.P99, r.RawCPU.TotalMs(), r.Ratio, r.VsUnfiltered)
	}
	p("\n")
}

// filterTargets: a filtered search is exact (a check: a miss fails the
// run), and a selective filter does not make search slower (reported).
func filterTargets(f *FiltersReport) []Target {
	var out []Target
	for _, r := range f.Recall {
		t := Target{Name: "recall@10 of filtered vector search, " + r.Filter, Goal: "1.0",
			Measured: fmt.Sprintf("%.4f (min %.2f over %d queries)", r.Recall, r.Min, r.Queries),
			Met:      r.Recall >= 1 && r.Queries > 0, Gap: round3(1 - r.Recall), Check: true}
		out = append(out, t)
	}
	for _, r := range f.Rows {
		if r.Filter == "" {
			continue
		}
		t := Target{Name: "filtered/unfiltered service throughput, " + r.Name, Goal: ">= 1.0",
			Measured: fmt.Sprintf("%.2f", r.VsUnfiltered), Met: r.VsUnfiltered >= 1}
		if !t.Met {
			t.Gap = round3(1 - r.VsUnfiltered)
		}
		out = append(out, t)
	}
	return out
}
