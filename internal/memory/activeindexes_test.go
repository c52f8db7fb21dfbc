package memory

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/write"
	"github.com/engram-dev/engram/internal/testenv"
)

// seedStates gives the interleaved rows of seedInterleaved every state
// add's neighbour lookup distinguishes: about a fifth each deactivated
// recently (kept), deactivated beyond the retention (due for purge, left
// out), and superseded (by the owner's row of the round before: rows are
// interleaved owner by owner); the rest active. Contents are unique, so the
// lookup's answer is unique.
func seedStates(t *testing.T, f *fixture, rng *rand.Rand, rows []seedRow, owners int) {
	t.Helper()
	for i, r := range rows {
		switch x := rng.IntN(100); {
		case x < 20:
			f.exec(`UPDATE %s SET active = false, deactivated_at = now() - interval '2 days' WHERE id = $1`, r.id)
		case x < 40:
			f.exec(`UPDATE %s SET active = false, deactivated_at = now() - interval '40 days' WHERE id = $1`, r.id)
		case x < 60 && i >= owners:
			f.exec(`UPDATE %s SET active = false, deactivated_at = now(), superseded_by = $2 WHERE id = $1`, r.id, rows[i-owners].id)
		}
	}
}

// TestNearestSplitMatchesOneScan: add's neighbour lookup over the active
// covering index and the inactive-owner index (migration 12) finds the same
// neighbour as one scan of all the owner's rows with the same conditions,
// for random vectors and for texts identical to rows in every state.
func TestNearestSplitMatchesOneScan(t *testing.T) {
	const owners, perOwner, dims = 8, 120, 384
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(12, 7))
	rows := seedInterleaved(t, f, rng, owners, perOwner, dims)
	seedStates(t, f, rng, rows, owners)
	f.exec(`VACUUM (ANALYZE) %s`)
	split := f.store.NearestQuery(dims)
	// A write path whose covering index holds no vector size runs the
	// one-phase lookup over the owner index.
	oneScan := write.New(f.store.core, 0).NearestQuery(dims)
	lookup := func(sql, owner, content string, vec []float32) string {
		var id, text, category, agent, session string
		var active, exact bool
		var updated time.Time
		var sim float64
		err := f.store.core.Pool.QueryRow(ctx(t), sql, owner, pgv.NewVector(vec), content).
			Scan(&id, &text, &category, &agent, &session, &active, &updated, &sim, &exact)
		if errors.Is(err, pgx.ErrNoRows) {
			return "none"
		}
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s exact=%v active=%v", id, exact, active)
	}
	checked, exact := 0, 0
	for i := range 400 {
		owner := fmt.Sprintf("owner-%02d", rng.IntN(owners))
		content := "a text no row has"
		if i%2 == 0 {
			content = fmt.Sprintf("memory %d of %s", rng.IntN(perOwner), owner)
		}
		vec := randomUnit(rng, dims)
		got, want := lookup(split, owner, content, vec), lookup(oneScan, owner, content, vec)
		if got != want {
			t.Fatalf("owner %s, text %q: split lookup %s, one scan %s", owner, content, got, want)
		}
		checked++
		if strings.Contains(got, "exact=true") {
			exact++
		}
	}
	if exact < 50 || exact == checked {
		t.Fatalf("%d of %d lookups found an identical text: the test does not cover both cases", exact, checked)
	}
}

// TestActiveIndexesHoldActiveRowsOnly: the covering index of migration 12
// holds one entry per active, non-superseded row (a plain VACUUM counts a
// btree's entries exactly), so a deactivation (a non-HOT update) adds
// nothing to it; the text index has the same predicate (a GIN index's
// entry count is not kept); the indexes they replace are gone.
func TestActiveIndexesHoldActiveRowsOnly(t *testing.T) {
	testenv.SkipOnCitus(t, "the index's entries are counted in the coordinator's catalog, and the rows live in the worker's shard")
	const owners, perOwner, dims = 4, 100, 384
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(3, 9))
	seedStates(t, f, rng, seedInterleaved(t, f, rng, owners, perOwner, dims), owners)
	f.exec(`VACUUM %s`)
	active := f.count(`SELECT count(*) FROM %s WHERE active AND superseded_by IS NULL`)
	if active == 0 || active == owners*perOwner {
		t.Fatalf("%d active rows: the seed has no mix of states", active)
	}
	var tuples float64
	if err := f.admin.QueryRow(ctx(t), `SELECT reltuples FROM pg_class WHERE oid = $1::regclass`,
		f.store.core.Schema+"."+ownerVectorsIndex).Scan(&tuples); err != nil {
		t.Fatal(err)
	}
	if int64(tuples) != active {
		t.Errorf("%s holds %v entries after VACUUM, want the %d active rows", ownerVectorsIndex, tuples, active)
	}
	for idx, want := range map[string]string{
		ownerVectorsIndex:             "(active AND (superseded_by IS NULL))",
		"memories_owner_text_idx":     "(active AND (superseded_by IS NULL))",
		"memories_inactive_owner_idx": "((deactivated_at IS NOT NULL) AND (superseded_by IS NULL))",
	} {
		var pred string
		if err := f.admin.QueryRow(ctx(t), `SELECT pg_get_expr(indpred, indrelid) FROM pg_index WHERE indexrelid = $1::regclass`,
			f.store.core.Schema+"."+idx).Scan(&pred); err != nil {
			t.Fatalf("%s: %v", idx, err)
		}
		if pred != want {
			t.Errorf("%s: predicate %s, want %s", idx, pred, want)
		}
	}
	var old int
	if err := f.admin.QueryRow(ctx(t), `SELECT count(*) FROM pg_indexes WHERE schemaname = $1
		AND indexname IN ('memories_owner_vectors_idx', 'memories_tsv_idx')`, f.store.core.Schema).Scan(&old); err != nil || old != 0 {
		t.Fatalf("%d indexes replaced by migration 12 are left (%v)", old, err)
	}
}

// TestIdenticalTextPrefersActive: when a deleted row and an active row
// (changed to it by an update, which does not deduplicate) hold the same
// text, adding that text again finds the active row and leaves the deleted
// one deleted: never two active rows with one text.
func TestIdenticalTextPrefersActive(t *testing.T) {
	f := newFixture(t)
	for i := range 20 {
		text := fmt.Sprintf("the user keeps bees in hive number %d", i)
		gone := f.add(AddRequest{Owner: "alice", Content: text}).Memory
		if err := f.store.Delete(ctx(t), "alice", gone.ID, SourceUser); err != nil {
			t.Fatal(err)
		}
		kept := f.add(AddRequest{Owner: "alice", Content: fmt.Sprintf("an unrelated fact about tide tables %d", i)}).Memory
		if _, err := f.store.Update(ctx(t), UpdateRequest{Owner: "alice", ID: kept.ID, Source: SourceUser, Content: &text}); err != nil {
			t.Fatal(err)
		}
		r := f.add(AddRequest{Owner: "alice", Content: text})
		if r.Action == ActionReactivated || r.Memory.ID != kept.ID {
			t.Fatalf("add of %q = %s %s; want the active row %s, not the deleted %s", text, r.Action, r.Memory.ID, kept.ID, gone.ID)
		}
		if n := f.count(`SELECT count(*) FROM %s WHERE owner_id = 'alice' AND active AND content = $1`, text); n != 1 {
			t.Fatalf("%d active rows hold %q", n, text)
		}
	}
}

// TestNearestPlanAfterDeactivationBurst: statistics taken while every
// inactive row was old, then a burst of deactivations (as decay and expire
// make): add's lookup still reads one owner's rows through an index led by
// owner_id, never the purge's tenant-wide index on deactivation time.
func TestNearestPlanAfterDeactivationBurst(t *testing.T) {
	const owners, perOwner, dims = 20, 200, 384
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(5, 5))
	seedInterleaved(t, f, rng, owners, perOwner, dims)
	f.exec(`UPDATE %s SET active = false, deactivated_at = now() - interval '60 days' WHERE md5(content) < '6'`)
	f.exec(`VACUUM (ANALYZE) %s`)
	if n := f.exec(`UPDATE %s SET active = false, deactivated_at = now() WHERE active AND md5(content) >= 'b'`); n < 1000 {
		t.Fatalf("burst deactivated %d rows, want over 1,000", n)
	}
	plan := explain(t, f, f.store.NearestQuery(dims), "owner-07", pgv.NewVector(randomUnit(rng, dims)), "memory 23 of owner-07")
	if strings.Contains(plan, "memories_inactive_idx") || !strings.Contains(plan, "memories_inactive_owner_idx") {
		t.Fatalf("add's lookup does not read the owner's inactive rows through the inactive-owner index:\n%s", plan)
	}
}
