package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
)

// BenchmarkOwnerScale measures what one owner of n memories costs — the
// price of limits.maxMemoriesPerOwner — in the engine, one client at a time:
// vector and hybrid search, context, add (with its dedup scan, and its
// eviction when the owner is full), and compaction of the owner (a full
// pass from scratch, then an incremental pass after 50 new memories).
//
// The owner's rows are interleaved with three times as many rows of other
// owners (about 1,000 each), as organic growth lays them out on the heap:
// about one row of the owner per page, the worst layout and the usual one
// of a long-lived owner in a busy tenant. They were written two days ago.
// Sizes come from ENGRAM_SCALE_SIZES (default "1000,2000": the default cap
// and the largest allowed); sizes above MaxMemoriesPerOwnerLimit show what
// it keeps out. docs/performance.md#owner-size has the figures.
//
//	ENGRAM_SCALE_SIZES=1000,2000,5000,10000 go test ./internal/memory -run '^$' \
//	    -bench BenchmarkOwnerScale -benchtime 100x -timeout 60m
func BenchmarkOwnerScale(b *testing.B) {
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("memories=%d", n), func(b *testing.B) {
			f := newFixture(b, withMaxConns(4))
			// The owner is full at n: each add also evicts, as at the cap.
			// Above the largest allowed cap the store's policy is changed
			// after validation, to measure what the maximum keeps out.
			f.store.core.Policy.Limits.MaxMemoriesPerOwner = n
			queries := seedScale(b, f, n)
			r := rand.New(rand.NewPCG(uint64(n), 7))
			b.Run("search-vector", func(b *testing.B) {
				measure(b, func(int) error {
					_, err := f.store.Search(ctx(b), SearchRequest{Owner: "big", Query: queries[r.IntN(len(queries))], Mode: SearchVector})
					return err
				})
			})
			b.Run("search-hybrid", func(b *testing.B) {
				measure(b, func(int) error {
					_, err := f.store.Search(ctx(b), SearchRequest{Owner: "big", Query: queries[r.IntN(len(queries))], Mode: SearchHybrid})
					return err
				})
			})
			b.Run("context", func(b *testing.B) {
				measure(b, func(int) error {
					_, err := f.store.Context(ctx(b), ContextRequest{Owner: "big", Query: queries[r.IntN(len(queries))]})
					return err
				})
			})
			b.Run("add", func(b *testing.B) {
				measure(b, func(i int) error {
					_, err := f.store.Add(ctx(b), AddRequest{Owner: "big", Content: scaleText(r, 1_000_000+i)})
					return err
				})
			})
			b.Run("compact", func(b *testing.B) { measureCompaction(b, f, r) })
		})
	}
}

// scaleSizes reads ENGRAM_SCALE_SIZES.
func scaleSizes(b *testing.B) []int {
	spec := os.Getenv("ENGRAM_SCALE_SIZES")
	if spec == "" {
		spec = "1000,2000"
	}
	var out []int
	for _, s := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 10 || n > 1_000_000 {
			b.Fatalf("ENGRAM_SCALE_SIZES: %q must be sizes within 10..1000000", spec)
		}
		out = append(out, n)
	}
	return out
}

// scaleWords is the vocabulary of scaleText: 5,000 pseudo-words.
var scaleWords = func() []string {
	r := rand.New(rand.NewPCG(5, 5000))
	out := make([]string, 5000)
	for i := range out {
		b := make([]byte, 4+r.IntN(6))
		for j := range b {
			b[j] = byte('a' + r.IntN(26))
		}
		out[i] = string(b)
	}
	return out
}()

// scaleText is a memory of 7-13 words; two share almost none, so dedup
// inserts.
func scaleText(r *rand.Rand, i int) string {
	words := make([]string, 7+r.IntN(7))
	for w := range words {
		words[w] = scaleWords[r.IntN(len(scaleWords))]
	}
	return fmt.Sprintf("%s (%d)", strings.Join(words, " "), i)
}

// seedScale writes n memories of owner "big" interleaved with 3n of other
// owners, straight into the table (an add each would take hours at the
// larger sizes), vacuums and analyzes, and returns queries: 3-5 words of
// one of big's memories plus an unrelated word.
func seedScale(b *testing.B, f *fixture, n int) []string {
	b.Helper()
	start := time.Now()
	r := rand.New(rand.NewPCG(uint64(n), 1))
	const batch = 2000
	var owners, contents, vectors []string
	var queries []string
	flush := func() {
		// Written two days ago: older than compaction's margin for fresh rows.
		insertScaleRows(b, f, owners, contents, vectors, 48*time.Hour)
		owners, contents, vectors = owners[:0], contents[:0], vectors[:0]
	}
	for i := range 4 * n {
		owner := "big"
		if i%4 != 0 {
			owner = fmt.Sprintf("other-%04d", i/4000)
		}
		text := scaleText(r, i)
		if owner == "big" && len(queries) < 500 {
			words := strings.Fields(text)
			queries = append(queries, strings.Join(words[:3+r.IntN(3)], " ")+" "+scaleWords[r.IntN(len(scaleWords))])
		}
		owners, contents, vectors = append(owners, owner), append(contents, text), append(vectors, scaleVector(b, f, text))
		if len(owners) == batch {
			flush()
		}
	}
	if len(owners) > 0 {
		flush()
	}
	if _, err := f.admin.Exec(ctx(b), `VACUUM (ANALYZE) `+f.store.sql.memories); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d memories (%d of owner big) in %s", 4*n, n, time.Since(start).Round(time.Millisecond))
	return queries
}

// scaleVector is text's embedding as pgvector text.
func scaleVector(b *testing.B, f *fixture, text string) string {
	vecs, err := f.store.core.Embedder.Embed(context.Background(), []string{text})
	if err != nil {
		b.Fatal(err)
	}
	return pgv.NewVector(vecs[0]).String()
}

// insertScaleRows writes memories straight into the table, as written age ago.
func insertScaleRows(b *testing.B, f *fixture, owners, contents, vectors []string, age time.Duration) {
	_, err := f.admin.Exec(ctx(b), `INSERT INTO `+f.store.sql.memories+`
			(id, owner_id, source, category, content, embedding, importance, created_at, updated_at)
		SELECT gen_random_uuid(), o, 'agent', 'preference', c, v::vector, 5, now() - $4::interval, now() - $4::interval
		FROM unnest($1::text[], $2::text[], $3::text[]) AS r(o, c, v)`, owners, contents, vectors, age)
	if err != nil {
		b.Fatalf("seeding: %v", err)
	}
}

// measure runs op b.N times and reports the latency percentiles.
func measure(b *testing.B, op func(i int) error) {
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		if err := op(i); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportLatency(b, lat)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(p float64) float64 {
		i := int(p*float64(len(lat))+0.999999) - 1
		return float64(lat[max(0, min(i, len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// measureCompaction times a full pass over big from scratch (in runs of the
// default owner budget, at most 30), then b.N incremental passes: each
// after 50 new memories of big, the ones of the iteration before removed,
// and the owner's watermark set as a complete pass a while ago leaves it.
func measureCompaction(b *testing.B, f *fixture, r *rand.Rand) {
	pass := func() (time.Duration, int, *JobResult) {
		res := &JobResult{}
		start := time.Now()
		runs := 0
		for runs < 30 {
			runs++
			before := res.Pending
			if err := (*maintenance)(f.store).compactOwner(ctx(b), "big", JobOptions{BatchSize: defaultBatchSize, OwnerBudget: DefaultCompactOwnerBudget}, core.NewPace(JobOptions{}, res), res); err != nil {
				b.Fatal(err)
			}
			if res.Pending == before {
				break
			}
		}
		return time.Since(start), runs, res
	}
	exec := func(sql string) {
		if _, err := f.admin.Exec(ctx(b), sql); err != nil {
			b.Fatal(err)
		}
	}
	exec(`DELETE FROM ` + f.store.sql.compactState)
	full, runs, res := pass()
	if runs == 30 {
		b.Logf("the full pass did not end within 30 runs (%s)", full)
	}
	b.Logf("full pass: %s in %d runs, %d rows read, %d superseded", full.Round(time.Millisecond), runs, res.Scanned, res.Affected)
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		// The seeded memories are two days old; only this round's are fresh.
		exec(`DELETE FROM ` + f.store.sql.memories + ` WHERE owner_id = 'big' AND updated_at > now() - interval '1 day'`)
		var owners, contents, vectors []string
		for j := range 50 {
			text := scaleText(r, 2_000_000+i*50+j)
			owners, contents, vectors = append(owners, "big"), append(contents, text), append(vectors, scaleVector(b, f, text))
		}
		insertScaleRows(b, f, owners, contents, vectors, 0)
		exec(`UPDATE ` + f.store.sql.compactState + ` SET compared_through = now() - interval '1 minute' WHERE owner_id = 'big'`)
		b.StartTimer()
		d, _, _ := pass()
		lat = append(lat, d)
	}
	reportLatency(b, lat)
	// After the loop: b.Loop's timer reset deletes metrics reported before it.
	b.ReportMetric(full.Seconds(), "full-pass-s")
	b.ReportMetric(float64(runs), "full-pass-runs")
}
