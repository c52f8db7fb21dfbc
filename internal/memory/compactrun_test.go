package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
)

// seededRows are memories to write identically into several tenants.
type seededRows struct {
	ids, owners, agents, contents, vectors []string
	importance                             []int
	updatedAt                              []time.Time
}

// duplicateRows makes, for owner, distinct memories each written copies
// times (the copies differ in punctuation only, so their vectors are equal),
// with importances, times and agents that vary.
func duplicateRows(t testing.TB, owner string, distinct, copies int) *seededRows {
	t.Helper()
	emb, _ := NewBuiltinEmbedder(384)
	r := rand.New(rand.NewPCG(uint64(distinct), uint64(copies)))
	s := &seededRows{}
	base := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	for range distinct {
		words := make([]string, 8)
		for w := range words {
			words[w] = fmt.Sprintf("w%x", r.IntN(1<<20))
		}
		text := strings.Join(words, " ")
		vecs, err := emb.Embed(context.Background(), []string{text})
		if err != nil {
			t.Fatal(err)
		}
		for c := range copies {
			n := len(s.ids)
			s.ids = append(s.ids, core.NewID())
			s.owners = append(s.owners, owner)
			s.agents = append(s.agents, fmt.Sprintf("agent-%d", n%3))
			s.contents = append(s.contents, text+strings.Repeat(".", c))
			s.vectors = append(s.vectors, pgv.NewVector(vecs[0]).String())
			s.importance = append(s.importance, 1+(n*7)%10)
			s.updatedAt = append(s.updatedAt, base.Add(-time.Duration(n%50)*time.Second))
		}
	}
	return s
}

// seed writes the rows into f's tenant as they are (ids and times included).
func (s *seededRows) seed(t testing.TB, f *fixture) {
	t.Helper()
	_, err := f.admin.Exec(ctx(t), `INSERT INTO `+f.store.sql.memories+`
			(id, owner_id, agent_id, source, category, content, embedding, importance, created_at, updated_at)
		SELECT id, owner_id, agent_id, 'agent', 'preference', content, v::vector, importance, at, at
		FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::timestamptz[])
			AS r(id, owner_id, agent_id, content, v, importance, at)`,
		s.ids, s.owners, s.agents, s.contents, s.vectors, s.importance, s.updatedAt)
	if err != nil {
		t.Fatalf("seeding: %v", err)
	}
}

// compactOutcome is every memory's state after compaction, in id order.
func (f *fixture) compactOutcome() string {
	f.t.Helper()
	rows, err := f.admin.Query(ctx(f.t), `SELECT id, active, coalesce(superseded_by::text, ''), agent_id, session_id
		FROM `+f.store.sql.memories+` ORDER BY id`)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id, by, agent, session string
		var active bool
		if err := rows.Scan(&id, &active, &by, &agent, &session); err != nil {
			f.t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %v %s %s %s\n", id, active, by, agent, session)
	}
	return b.String()
}

// largestCompactTransaction is the most memories one transaction of
// compaction superseded: its history rows share the transaction's now().
func (f *fixture) largestCompactTransaction() (largest, transactions int64) {
	f.t.Helper()
	err := f.admin.QueryRow(ctx(f.t), `SELECT coalesce(max(n), 0), count(*) FROM (
		SELECT count(*) AS n FROM `+f.store.sql.history+` WHERE action = 'compact' GROUP BY created_at) AS t`).Scan(&largest, &transactions)
	if err != nil {
		f.t.Fatal(err)
	}
	return largest, transactions
}

// TestCompactResumesWhereItStopped: a run out of time budget stops after a
// batch and the next run continues at the cursor; the runs together end
// exactly where one unbounded run ends, every transaction superseding at
// most one batch; then there is nothing left to do until a memory changes.
func TestCompactResumesWhereItStopped(t *testing.T) {
	unbounded := newFixture(t)
	bounded := newFixture(t, inDatabaseOf(unbounded))
	rows := duplicateRows(t, "big", 40, 5)
	small := duplicateRows(t, "small", 2, 2)
	for _, f := range []*fixture{unbounded, bounded} {
		rows.seed(t, f)
		small.seed(t, f)
	}
	const batch = 10
	want, err := unbounded.store.RunJob(ctx(t), OpCompact, JobOptions{BatchSize: batch})
	if err != nil || want.Pending != 0 || want.Affected != 40*4+2 {
		t.Fatalf("unbounded compaction = %+v, %v; want %d superseded, nothing pending", want, err, 40*4+2)
	}

	tiny := JobOptions{BatchSize: batch, OwnerBudget: time.Nanosecond}
	first, err := bounded.store.RunJob(ctx(t), OpCompact, tiny)
	if err != nil || first.Pending != 1 || first.Affected == 0 || first.Affected > batch+2 {
		t.Fatalf("first bounded run = %+v, %v; want one batch of big (pending) and all of small", first, err)
	}
	affected, runs := first.Affected, 1
	scanned := first.Scanned
	for pending := first.Pending; pending > 0; runs++ {
		if runs > 100 {
			t.Fatal("compaction does not progress")
		}
		next, err := bounded.store.RunJob(ctx(t), OpCompact, tiny)
		if err != nil {
			t.Fatal(err)
		}
		if next.Scanned >= scanned {
			t.Fatalf("run %d read %d memories, the run before %d: it did not continue after the cursor", runs+1, next.Scanned, scanned)
		}
		scanned, pending, affected = next.Scanned, next.Pending, affected+next.Affected
	}
	if runs < 4 || affected != want.Affected {
		t.Fatalf("%d bounded runs superseded %d memories; want several runs and %d", runs, affected, want.Affected)
	}
	if got, exp := bounded.compactOutcome(), unbounded.compactOutcome(); got != exp {
		t.Fatalf("bounded runs ended in\n%s\nan unbounded run in\n%s", got, exp)
	}
	for name, f := range map[string]*fixture{"unbounded": unbounded, "bounded": bounded} {
		if largest, txs := f.largestCompactTransaction(); largest > batch || txs < 16 {
			t.Fatalf("%s: a compaction transaction superseded %d memories in %d transactions; want at most %d each", name, largest, txs, batch)
		}
	}

	idle, err := bounded.store.RunJob(ctx(t), OpCompact, tiny)
	if err != nil || idle.Scanned != 0 || idle.Affected != 0 {
		t.Fatalf("run after a complete pass = %+v, %v; want no owner read", idle, err)
	}
	bounded.add(AddRequest{Owner: "big", Content: "a new fact that makes the owner worth a look"})
	if again, err := bounded.store.RunJob(ctx(t), OpCompact, tiny); err != nil || again.Scanned == 0 || again.Affected != 0 {
		t.Fatalf("run after a write = %+v, %v; want the owner read again, nothing superseded", again, err)
	}
	if _, err := bounded.store.EraseOwner(ctx(t), "big"); err != nil {
		t.Fatal(err)
	}
	var left int64
	if err := bounded.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+bounded.store.sql.compactState+` WHERE owner_id = 'big'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("compaction state of an erased owner: %d rows, %v", left, err)
	}
}

// TestCompactDoesNotBlockOwnerWrites: between two batches of a large
// owner's compaction, a write of that owner goes through at once; the owner
// lock is held for one batch at a time, never for the whole owner.
func TestCompactDoesNotBlockOwnerWrites(t *testing.T) {
	f := newFixture(t, withSession(SessionSettings{LockTimeout: time.Second}))
	rows := duplicateRows(t, "big", 60, 5)
	rows.seed(t, f)
	paused, resume := make(chan struct{}), make(chan struct{})
	calls := 0
	f.store.afterCompactBatch = func(owner string) {
		if calls++; calls == 2 {
			close(paused)
			<-resume
		}
	}
	done := make(chan error, 1)
	go func() {
		res, err := f.store.RunJob(context.Background(), OpCompact, JobOptions{BatchSize: 20})
		if err == nil && res.Affected != 60*4 {
			err = fmt.Errorf("compaction superseded %d, want %d", res.Affected, 60*4)
		}
		done <- err
	}()
	select {
	case <-paused:
	case err := <-done:
		t.Fatalf("compaction ended before its second batch: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("compaction did not reach its second batch")
	}
	superseded := f.count(`SELECT count(*) FROM %s WHERE superseded_by IS NOT NULL`)
	// With the owner's lock held (for longer than the store's 1 s
	// lock_timeout) the add fails with ErrBusy instead of passing.
	r, err := f.store.Add(ctx(t), AddRequest{Owner: "big", Content: "written while the owner is being compacted"})
	close(resume)
	if err != nil || r.Action != ActionAdded {
		t.Fatalf("add during compaction = %+v, %v", r, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if superseded == 0 || superseded >= 60*4 {
		t.Fatalf("%d memories superseded when the add ran; want the compaction between batches", superseded)
	}
}

// TestCompactThresholdChangeStartsOver: a pass in progress was comparing
// for another autoMergeThreshold; after the policy changes, the memories
// it already looked at are compared again, for the new threshold.
func TestCompactThresholdChangeStartsOver(t *testing.T) {
	f := newFixture(t)
	unit := func(x, y float64) string {
		v := make([]float32, 384)
		v[0], v[1] = float32(x), float32(y)
		return pgv.NewVector(v).String()
	}
	now := time.Now().Add(-2 * time.Hour).Truncate(time.Microsecond)
	rows := &seededRows{
		// a and b at cosine 0.92: apart for 0.95, duplicates for 0.9; c unrelated.
		ids:        []string{core.NewID(), core.NewID(), core.NewID()},
		owners:     []string{"o", "o", "o"},
		agents:     []string{"", "", ""},
		contents:   []string{"a", "c", "b"},
		vectors:    []string{unit(1, 0), unit(0, 1), unit(0.92, 0.3919183588)},
		importance: []int{9, 5, 1},
		updatedAt:  []time.Time{now, now, now},
	}
	rows.seed(t, f)
	tiny := JobOptions{BatchSize: 1, OwnerBudget: time.Nanosecond}
	if res, err := f.store.RunJob(ctx(t), OpCompact, tiny); err != nil || res.Pending != 1 || res.Affected != 0 {
		t.Fatalf("first run = %+v, %v; want a looked at, nothing superseded, pending", res, err)
	}
	p := f.store.Policy()
	p.Dedup.AutoMergeThreshold = 0.9
	lower, err := New(Config{Pool: f.store.core.Pool, Schema: f.store.core.Schema, Policy: p, Embedder: f.store.core.Embedder})
	if err != nil {
		t.Fatal(err)
	}
	defer lower.Close()
	affected := int64(0)
	for runs := 0; ; runs++ {
		res, err := lower.RunJob(ctx(t), OpCompact, tiny)
		if err != nil || runs > 10 {
			t.Fatalf("run %d = %+v, %v", runs, res, err)
		}
		if affected += res.Affected; res.Pending == 0 {
			break
		}
	}
	if m, _ := f.store.Get(ctx(t), "o", rows.ids[2]); affected != 1 || m.SupersededBy != rows.ids[0] {
		t.Fatalf("after the threshold fell to 0.9: %d superseded, b = %+v; want b superseded by a", affected, m)
	}
}
