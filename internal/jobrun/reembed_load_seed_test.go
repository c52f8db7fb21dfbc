package jobrun

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory"
)

// The re-embed load test's tenant (TestReembedUnderLoad): memories over
// loadOwners owners, the service's reads and writes spread over them.
const (
	loadOwners = 40
	// loadEngineAdds memories are written by the engine's add, one by one
	// (dedup and all); the rest by its insert statement, in batches.
	loadEngineAdds = 200
	// loadSessions owners get a session of loadTurns turns (2 messages
	// each), compacted into summaries and ended into an episode by the
	// engine.
	loadSessions, loadTurns = 4, 8
)

// loadSize is how many memories the load test seeds: 20,000 (the issue's
// figure), or ENGRAM_REEMBED_MEMORIES, at most 900 an owner (the default
// policy's cap is 1,000: an add over it evicts one).
func loadSize(t *testing.T) int {
	t.Helper()
	v := os.Getenv("ENGRAM_REEMBED_MEMORIES")
	if v == "" {
		return 20_000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < loadEngineAdds+loadOwners || n > 900*loadOwners {
		t.Fatalf("ENGRAM_REEMBED_MEMORIES=%q: want a number within %d..%d", v, loadEngineAdds+loadOwners, 900*loadOwners)
	}
	return n
}

func loadOwner(i int) string { return fmt.Sprintf("owner-%02d", i%loadOwners) }

var loadWords = []string{"harbour", "violin", "glacier", "espresso", "tax", "marathon", "orchid", "telescope", "sourdough",
	"chess", "kayak", "volcano", "saxophone", "bonsai", "lighthouse", "origami", "budget", "deadline", "invoice", "garden"}

// loadText is the distinct text of memory i of a writer: a few words of
// the shared vocabulary (so hybrid search has text to match) and a word
// of its own (so no two are near duplicates the add would merge).
func loadText(writer string, i int) string {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s/%d", writer, i)
	x := h.Sum64()
	w := func(k int) string { return loadWords[(x>>(8*k))%uint64(len(loadWords))] }
	return fmt.Sprintf("%s note %d: the %s and the %s before the %s, ref %s", writer, i, w(0), w(1), w(2), strconv.FormatUint(x, 36))
}

// seedLoad writes n memories, loadSessions sessions with their summaries
// and episodes, all with the old (builtin) embedder's vectors: the first
// loadEngineAdds memories and the conversations through the store's API,
// the rest with the engine's own insert statement (Store.InsertQuery, its
// history row included, as bench/raw.go runs it) in batches of 500 rows a
// transaction on two connections, on a pool of the login role that names the old embedder as
// the service's does.
func seedLoad(t *testing.T, ctx context.Context, jt *jobTenant, n int) {
	t.Helper()
	t0 := time.Now()
	for i := range loadEngineAdds {
		jt.add(t, loadOwner(i), loadText("seed", i), "project")
	}
	t1 := time.Now()
	old, err := memory.NewBuiltinEmbedder(dims)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := memory.NewPool(ctx, jt.loginURL, 2, memory.SessionSettings{LockTimeout: 5 * time.Second, StatementTimeout: time.Minute,
		Embedder: memory.ReembedNamed(memory.ProviderBuiltin, "", dims).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	policy := memory.DefaultPolicy()
	project, _ := policy.Category("project")
	ttl := time.Duration(project.TTL).Seconds()
	// Two connections insert every other batch: on a busy machine two
	// backends get twice the CPU share of one.
	const batch = 500
	errs := make(chan error, 2)
	for c := range 2 {
		go func() {
			for from := loadEngineAdds + c*batch; from < n; from += 2 * batch {
				to := min(from+batch, n)
				texts := make([]string, 0, to-from)
				for i := from; i < to; i++ {
					texts = append(texts, loadText("seed", i))
				}
				vecs, err := old.Embed(ctx, texts)
				if err == nil {
					err = insertLoad(ctx, pool, jt.store.InsertQuery(), from, texts, vecs, ttl)
				}
				if err != nil {
					errs <- fmt.Errorf("seeding memories %d..%d: %w", from, to, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t2 := time.Now()
	for o := range loadSessions {
		owner, id := loadOwner(o), fmt.Sprintf("chat-%d", o)
		if _, err := jt.store.CreateSession(ctx, memory.CreateSessionRequest{Owner: owner, ID: id}); err != nil {
			t.Fatal(err)
		}
		for i := range loadTurns {
			if _, err := jt.store.AppendTurn(ctx, memory.AppendRequest{Owner: owner, SessionID: id, Messages: []memory.TurnMessage{
				{Role: memory.RoleUser, Content: "question " + loadText(id, 2*i)},
				{Role: memory.RoleAssistant, Content: "answer " + loadText(id, 2*i+1)},
			}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := jt.store.CompactSession(ctx, memory.CompactSessionRequest{Owner: owner, SessionID: id, Force: true}); err != nil {
			t.Fatalf("compacting %s: %v", id, err)
		}
		if _, err := jt.store.EndSession(ctx, memory.EndSessionRequest{Owner: owner, SessionID: id}); err != nil {
			t.Fatalf("ending %s: %v", id, err)
		}
	}
	t.Logf("seeded: %d adds in %s, %d inserts in %s, %d sessions in %s", loadEngineAdds, t1.Sub(t0).Round(time.Millisecond),
		n-loadEngineAdds, t2.Sub(t1).Round(time.Millisecond), loadSessions, time.Since(t2).Round(time.Millisecond))
}

// insertLoad runs the engine's insert for texts (memories from.. of the
// load's owners) in one transaction.
func insertLoad(ctx context.Context, pool *pgxpool.Pool, insert string, from int, texts []string, vecs [][]float32, ttl float64) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var b pgx.Batch
	for i, text := range texts {
		b.Queue(insert, uuidV7(), loadOwner(from+i), "", "", "agent", "project", text, 5, pgv.NewVector(vecs[i]), []string{},
			ttl, map[string]any{"similarity": 0}, "", "", nil, nil, "")
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// uuidV7 is a time-ordered id as the engine's (core.NewID, RFC 9562
// version 7).
func uuidV7() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	b[6] = 0x70 | (b[6] & 0x0f)
	b[8] = 0x80 | (b[8] & 0x3f)
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
