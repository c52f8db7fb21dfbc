package jobrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/tenant"
)

// The re-embed tests' new embedder: model "m2" of provider openai, served
// by fakeEmbedder, with vectors of the tests' dims made by fakeVector.
const fakeModel = "m2"

// fakeEmbedder is an OpenAI-compatible /v1/embeddings server on 127.0.0.1
// (httptest) answering fakeVector of each text, or, while down, 400 to
// everything.
type fakeEmbedder struct {
	srv   *httptest.Server
	down  atomic.Bool
	calls atomic.Int64
}

func newFakeEmbedder(t *testing.T) *fakeEmbedder {
	t.Helper()
	f := &fakeEmbedder{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		var req struct {
			Input []string `json:"input"`
		}
		if r.URL.Path != "/v1/embeddings" || f.down.Load() || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error":{"message":"down"}}`, http.StatusBadRequest)
			return
		}
		// Written by hand: encoding/json's reflection is most of the
		// fake's time under -race (256 vectors a batch).
		out := []byte(`{"data":[`)
		for i, text := range req.Input {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, `{"index":`...)
			out = strconv.AppendInt(out, int64(i), 10)
			out = append(out, `,"embedding":[`...)
			for j, x := range fakeVector(text) {
				if j > 0 {
					out = append(out, ',')
				}
				out = strconv.AppendFloat(out, float64(x), 'g', -1, 32)
			}
			out = append(out, "]}"...)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(out, "]}"...))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// config is the embedding configuration of a runtime on the fake.
func (f *fakeEmbedder) config() memory.EmbeddingConfig {
	return memory.EmbeddingConfig{Provider: memory.ProviderOpenAI, Model: fakeModel, Endpoint: f.srv.URL + "/v1", Dimensions: dims}
}

// embedder is a client of the fake, as the re-embed Job builds it.
func (f *fakeEmbedder) embedder(t *testing.T) memory.Embedder {
	t.Helper()
	emb, err := memory.NewEmbedder(f.config(), "", &http.Client{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return emb
}

// fakeTo is the re-embed's name of the fake's embedder.
func fakeTo() memory.ReembedEmbedder {
	return memory.ReembedNamed(memory.ProviderOpenAI, fakeModel, dims)
}

// fakeVector is the fake's vector of text: dense, deterministic, seeded
// by a hash of the text (so unlike the builtin embedder's, and without the
// ties of a one-hot vector that would make a top-k ambiguous).
func fakeVector(text string) []float32 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(text))
	r := rand.New(rand.NewPCG(h.Sum64(), 29))
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(r.Float64()*2 - 1)
	}
	return v
}

// vectorTables are the tables with an embedding and the column of the
// text it is made of (reembed's vectorTables).
var vectorTables = []struct{ name, text string }{
	{"memories", "content"}, {"messages", "content"}, {"summaries", "content"}, {"episodes", "summary"},
}

// checkFakeVectors fails the test for every row of the four vector tables
// whose embedding is not the fake's vector of its text, and returns how
// many rows each table holds with a vector.
func checkFakeVectors(t *testing.T, ctx context.Context, admin *pgxpool.Pool, schema string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, vt := range vectorTables {
		rows, err := admin.Query(ctx, `SELECT `+vt.text+`, embedding FROM `+schema+`.`+vt.name+` WHERE embedding IS NOT NULL`)
		if err != nil {
			t.Fatal(err)
		}
		wrong := 0
		for rows.Next() {
			var text string
			var v pgv.Vector
			if err := rows.Scan(&text, &v); err != nil {
				rows.Close()
				t.Fatal(err)
			}
			counts[vt.name]++
			if !sameVector(v.Slice(), fakeVector(text)) {
				if wrong++; wrong <= 5 {
					t.Errorf("%s: not the new model's vector of %q", vt.name, text)
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if wrong > 0 {
			t.Errorf("%s: %d of %d rows without the new model's vector of their text", vt.name, wrong, counts[vt.name])
		}
	}
	return counts
}

// sameVector: equal within float32 rounding of a round trip through PostgreSQL.
func sameVector(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if d := a[i] - b[i]; d > 1e-6 || d < -1e-6 {
			return false
		}
	}
	return true
}

// startLoop runs loop.Run(ctx) on a goroutine. The func it returns waits
// for the run to end (at most within, after the switch), fails the test
// unless it ended done (switched) after catching up, and returns its
// result; what names the run in the failures.
func startLoop(ctx context.Context, loop ReembedLoop) func(t *testing.T, what string, within time.Duration) ReembedResult {
	type result struct {
		res ReembedResult
		err error
	}
	ran := make(chan result, 1)
	go func() {
		res, err := loop.Run(ctx)
		ran <- result{res, err}
	}()
	return func(t *testing.T, what string, within time.Duration) ReembedResult {
		t.Helper()
		var r result
		select {
		case r = <-ran:
		case <-time.After(within):
			t.Fatalf("%s did not end within %s of the switch", what, within)
		}
		if r.err != nil || !r.res.Done || !r.res.CaughtUp {
			t.Fatalf("%s: %+v, %v; want done (switched) after catching up", what, r.res, r.err)
		}
		return r.res
	}
}

// addTopics adds n memories of alice in category project, the i-th
// fmt.Sprintf(format, i, i*7).
func (jt *jobTenant) addTopics(t *testing.T, n int, format string) {
	t.Helper()
	for i := range n {
		jt.add(t, "alice", fmt.Sprintf(format, i, i*7), "project")
	}
}

// reembedTarget is the tenant's schema and roles, as the operator names them.
func (jt *jobTenant) reembedTarget() memory.ReembedTarget {
	return memory.ReembedTarget{Schema: jt.schema, Owner: tenant.OwnerRole(jt.schema), Login: tenant.LoginRole(jt.schema)}
}

// beginReembed begins a re-embed of the tenant from the builtin embedder
// of dims (what newJobTenant configures) to to, and returns its target.
func (jt *jobTenant) beginReembed(t *testing.T, ctx context.Context, to memory.ReembedEmbedder) memory.ReembedTarget {
	t.Helper()
	target := jt.reembedTarget()
	if err := memory.ReembedBegin(ctx, jt.admin, target, memory.ReembedNamed(memory.ProviderBuiltin, "", dims), to); err != nil {
		t.Fatal(err)
	}
	return target
}

// trySwitch is one Switch of the operator's poll: true if it went
// through; ErrReembedRowsLeft (rows written since the count) adds one to
// rowsLeft, any other error fails the test.
func trySwitch(t *testing.T, ctx context.Context, admin *pgxpool.Pool, target memory.ReembedTarget, rowsLeft *int) bool {
	t.Helper()
	err := memory.ReembedSwitch(ctx, admin, target)
	switch {
	case errors.Is(err, memory.ErrReembedRowsLeft):
		*rowsLeft++
	case err != nil:
		t.Fatal(err)
	default:
		return true
	}
	return false
}
