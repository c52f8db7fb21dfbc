package memory

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/tenant"
)

// BenchmarkCandidatePaths measures the owner-local hybrid and filtered
// vector queries against the one-phase ones, raw through pgx, one client,
// on a tenant laid out like the benchmark's (40 owners x 1,000 fresh
// memories written in rounds, so each owner's rows are spread over the
// heap; texts of 7-13 words of a 5,000-word vocabulary; queries of 3-5
// words of one of the owner's memories plus an unrelated word). It logs
// EXPLAIN (ANALYZE, BUFFERS) of one query of each, and the cost of the
// owner's text index of migration 12 to adds and searches (addCost).
// docs/performance.md#hybrid-and-context-candidates has the figures.
//
//	go test ./internal/memory -run '^$' -bench BenchmarkCandidatePaths -benchtime 400x
func BenchmarkCandidatePaths(b *testing.B) {
	f := newFixture(b, withMaxConns(4))
	f.store.core.Policy.Limits.MaxMemoriesPerOwner = 2000
	queries := seedCandidateBench(b, f, 40, 1000)
	r := rand.New(rand.NewPCG(3, 4))
	pick := func() (string, string, []float32) {
		i := r.IntN(len(queries))
		owner := fmt.Sprintf("owner-%02d", i%40)
		vec, err := f.store.core.Embedder.Embed(ctx(b), []string{queries[i]})
		if err != nil {
			b.Fatal(err)
		}
		return owner, queries[i], vec[0]
	}
	req := func(owner, query string) SearchRequest {
		return SearchRequest{Owner: owner, Query: query, Mode: SearchHybrid, TopK: 10, ExcludeFlagged: true}
	}
	answered := map[int]int{}
	b.Run("hybrid-one-phase", func(b *testing.B) {
		measure(b, func(int) error {
			owner, query, vec := pick()
			_, _, err := (*reader)(f.store).runSearch(ctx(b), f.store.core.Pool, SearchHybrid, (*reader)(f.store).buildSearch(SearchHybrid, req(owner, query), vec, 10, true))
			return err
		})
	})
	b.Run("hybrid-owner-local", func(b *testing.B) {
		measure(b, func(int) error {
			owner, query, vec := pick()
			_, attempt, err := (*reader)(f.store).hybridAttempts(ctx(b), f.store.core.Pool, req(owner, query), vec, 10)
			answered[attempt]++
			return err
		})
	})
	b.Logf("hybrid answered by attempt (2 = one-phase): %v", answered)
	vreq := func(owner string) SearchRequest {
		return SearchRequest{Owner: owner, Mode: SearchVector, TopK: 10, ExcludeFlagged: true}
	}
	b.Run("vector-filtered-4k+32", func(b *testing.B) {
		measure(b, func(int) error {
			owner, _, vec := pick()
			_, _, err := (*reader)(f.store).runSearch(ctx(b), f.store.core.Pool, SearchVector, (*reader)(f.store).buildVectorSearch(vreq(owner), vec, 10, 4*10+32))
			return err
		})
	})
	b.Run("vector-filtered-owner-local", func(b *testing.B) {
		measure(b, func(int) error {
			owner, _, vec := pick()
			_, err := (*reader)(f.store).searchSQL(ctx(b), SearchVector, vreq(owner), vec, 10)
			return err
		})
	})
	b.Run("context", func(b *testing.B) {
		measure(b, func(int) error {
			owner, query, vec := pick()
			sql, args := f.store.ContextQuery(ContextRequest{Owner: owner, Query: query}, vec, 1000)
			rows, err := f.store.core.Pool.Query(ctx(b), sql, args...)
			if err != nil {
				return err
			}
			for rows.Next() {
			}
			return rows.Err()
		})
	})
	owner, query, vec := pick()
	for name, q := range map[string]searchQuery{
		"hybrid one-phase":      (*reader)(f.store).buildSearch(SearchHybrid, req(owner, query), vec, 10, true),
		"hybrid owner-local":    (*reader)(f.store).hybridSQL(req(owner, query), vec, 10, hybridFirstCandidates(10)),
		"vector filtered 4k+32": (*reader)(f.store).buildVectorSearch(vreq(owner), vec, 10, 4*10+32),
		"vector filtered first": (*reader)(f.store).buildSearch(SearchVector, vreq(owner), vec, 10, false),
	} {
		b.Logf("%s (query %q of %s):\n%s", name, query, owner, explainBuffers(b, f, q.sql, q.args...))
	}
	hq := (*reader)(f.store).hybridSQL(req(owner, query), vec, 10, hybridFirstCandidates(10))
	b.Logf("hybrid owner-local, generic plan (as a prepared statement may get after 5 runs):\n%s", explainGeneric(b, f, hq.sql, hq.args...))
	sql, args := f.store.ContextQuery(ContextRequest{Owner: owner, Query: query}, vec, 1000)
	b.Logf("context (query %q of %s):\n%s", query, owner, explainBuffers(b, f, sql, args...))
	addCost(b, f, r, func() time.Duration {
		owner, query, vec := pick()
		start := time.Now()
		if _, _, err := (*reader)(f.store).hybridAttempts(ctx(b), f.store.core.Pool, req(owner, query), vec, 10); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	})
}

// addCost logs the mean time of 300 adds without the owner's text index of
// migration 12, with it (fastupdate off, as migrated), and with it in
// fastupdate mode (a pending list of at most 128 kB), and a hybrid search's
// time in each state.
func addCost(b *testing.B, f *fixture, r *rand.Rand, search func() time.Duration) {
	idx := pgx.Identifier{f.store.core.Schema, "memories_owner_text_idx"}.Sanitize()
	base := 5_000_000
	each := func(label string) {
		start := time.Now()
		for i := range 300 {
			if _, err := f.store.Add(ctx(b), AddRequest{Owner: fmt.Sprintf("owner-%02d", i%40), Content: scaleText(r, base+i)}); err != nil {
				b.Fatal(err)
			}
		}
		base += 1000
		add := float64(time.Since(start).Microseconds()) / 300 / 1000
		var total time.Duration
		for range 100 {
			total += search()
		}
		b.Logf("%s: add %.2f ms, hybrid search %.2f ms (means)", label, add, float64(total.Microseconds())/100/1000)
	}
	admin := func(sql string) {
		if _, err := f.admin.Exec(ctx(b), sql); err != nil {
			b.Fatal(err)
		}
	}
	each("GIN index, fastupdate off")
	admin(`DROP INDEX ` + idx)
	each("no GIN index")
	start := time.Now()
	admin(`CREATE INDEX CONCURRENTLY memories_owner_text_idx ON ` + f.store.sql.memories + ` USING gin (` +
		tenant.OwnerText("english", "") + `) WITH (fastupdate = off) WHERE active AND superseded_by IS NULL`)
	var size string
	if err := f.admin.QueryRow(ctx(b), `SELECT pg_size_pretty(pg_relation_size($1::regclass)) || ' (table ' || pg_size_pretty(pg_relation_size($2::regclass)) || ')'`,
		idx, f.store.sql.memories).Scan(&size); err != nil {
		b.Fatal(err)
	}
	b.Logf("CREATE INDEX CONCURRENTLY of the GIN index: %s, size %s", time.Since(start).Round(time.Millisecond), size)
	each("GIN index, fastupdate off, again")
	admin(`ALTER INDEX ` + idx + ` SET (fastupdate = on, gin_pending_list_limit = 128)`)
	each("GIN index, fastupdate on, 128 kB pending list")
}

// explainGeneric is EXPLAIN (ANALYZE, BUFFERS) of sql prepared and
// executed with plan_cache_mode = force_generic_plan.
func explainGeneric(b *testing.B, f *fixture, sql string, args ...any) string {
	conn, err := f.admin.Acquire(ctx(b))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	placeholders := make([]string, len(args))
	for i := range args {
		placeholders[i] = fmt.Sprintf("$%d", i+1)
	}
	for _, stmt := range []string{`SET plan_cache_mode = force_generic_plan`, `PREPARE generic_hybrid AS ` + sql} {
		if _, err := conn.Exec(ctx(b), stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
			b.Fatalf("%s: %v", stmt[:30], err)
		}
	}
	defer func() {
		_, _ = conn.Exec(ctx(b), `DEALLOCATE generic_hybrid; RESET plan_cache_mode`, pgx.QueryExecModeSimpleProtocol)
	}()
	// EXPLAIN takes no bind parameters: the simple protocol renders the
	// arguments as literals.
	rows, err := conn.Query(ctx(b), `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE generic_hybrid(`+strings.Join(placeholders, ", ")+`)`,
		append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	if err != nil {
		b.Fatalf("EXPLAIN EXECUTE: %v", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// explainBuffers is EXPLAIN (ANALYZE, BUFFERS) of sql.
func explainBuffers(b *testing.B, f *fixture, sql string, args ...any) string {
	rows, err := f.admin.Query(ctx(b), `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) `+sql, args...)
	if err != nil {
		b.Fatalf("EXPLAIN: %v", err)
	}
	var out []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			b.Fatal(err)
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// seedCandidateBench writes owners x per fresh memories in rounds and
// returns queries of each owner in turn (query i belongs to owner i%owners).
func seedCandidateBench(b *testing.B, f *fixture, owners, per int) []string {
	start := time.Now()
	r := rand.New(rand.NewPCG(1, 2))
	cats := []string{"preference", "project", "contextual", "identity"}
	var os, cs, ts, vs []string
	var queries []string
	flush := func() {
		_, err := f.admin.Exec(ctx(b), `INSERT INTO `+f.store.sql.memories+`
				(id, owner_id, source, category, content, embedding)
			SELECT gen_random_uuid(), o, 'agent', c, t, v::vector
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS r(o, c, t, v)`, os, cs, ts, vs)
		if err != nil {
			b.Fatalf("seeding: %v", err)
		}
		os, cs, ts, vs = os[:0], cs[:0], ts[:0], vs[:0]
	}
	for i := range per {
		for o := range owners {
			text := scaleText(r, i*owners+o)
			if i < 10 {
				words := strings.Fields(text)
				queries = append(queries, strings.Join(words[:3+r.IntN(3)], " ")+" "+scaleWords[r.IntN(len(scaleWords))])
			}
			os, cs, ts, vs = append(os, fmt.Sprintf("owner-%02d", o)), append(cs, cats[r.IntN(len(cats))]), append(ts, text), append(vs, scaleVector(b, f, text))
		}
		if len(os) >= 2000 {
			flush()
		}
	}
	if len(os) > 0 {
		flush()
	}
	f.exec(`VACUUM (ANALYZE) %s`)
	b.Logf("seeded %d memories in %s", owners*per, time.Since(start).Round(time.Millisecond))
	return queries
}
