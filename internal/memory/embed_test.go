package memory

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/modelapi"
)

func embedOne(t *testing.T, e Embedder, s string) []float32 {
	t.Helper()
	v, err := e.Embed(context.Background(), []string{s})
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}

func cos(a, b []float32) float64 { return cosine(a, b, norm(a), norm(b)) }

func TestBuiltinEmbedder(t *testing.T) {
	e, err := NewBuiltinEmbedder(384)
	if err != nil {
		t.Fatal(err)
	}
	a := embedOne(t, e, "The user prefers dark mode in the editor")
	if math.Abs(norm(a)-1) > 1e-5 || len(a) != 384 {
		t.Fatalf("not a unit vector of 384: len %d norm %f", len(a), norm(a))
	}
	if b := embedOne(t, e, "The user prefers dark mode in the editor"); cos(a, b) < 0.999999 {
		t.Fatal("not deterministic")
	}
	pairs := []struct {
		x, y     string
		min, max float64
	}{
		{"User prefers dark mode in the editor", "user prefers dark mode in the editor!", 0.99, 1.01},
		{"The user likes cats", "User like cat", 0.99, 1.01},
		{"User prefers dark mode in the editor", "User prefers dark mode in the code editor", 0.75, 0.99},
		{"I like coffee in the morning", "I love coffee in the morning", 0.4, 0.9},
		{"User prefers dark mode in the editor", "Quarterly revenue grew by ten percent", -0.2, 0.2},
		{"Allergic to peanuts", "Works as a data engineer in Berlin", -0.2, 0.2},
	}
	for _, p := range pairs {
		got := cos(embedOne(t, e, p.x), embedOne(t, e, p.y))
		if got < p.min || got > p.max {
			t.Errorf("cos(%q, %q) = %.3f, want within [%.2f, %.2f]", p.x, p.y, got, p.min, p.max)
		}
	}
	if v := embedOne(t, e, "!!! ???"); norm(v) == 0 {
		t.Error("text without words embeds to the zero vector")
	}
	for _, d := range []int{63, 4097} {
		if _, err := NewBuiltinEmbedder(d); err == nil {
			t.Errorf("dimensions %d accepted", d)
		}
	}
	for _, d := range []int{64, 4096} {
		e, _ := NewBuiltinEmbedder(d)
		if len(embedOne(t, e, "hello world")) != d {
			t.Errorf("dimensions %d not honoured", d)
		}
	}
}

// embeddingServer is an OpenAI-compatible /v1/embeddings in httptest.
func embeddingServer(t *testing.T, handler func(w http.ResponseWriter, inputs []string, call int64)) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, `{"error":{"message":"wrong path or key"}}`, http.StatusUnauthorized)
			return
		}
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "m" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		handler(w, req.Input, n)
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func vectorsFor(inputs []string, dims int) map[string]any {
	var data []any
	for i := len(inputs) - 1; i >= 0; i-- { // out of order on purpose: index decides
		v := make([]float32, dims)
		v[i%dims] = 1
		data = append(data, map[string]any{"index": i, "embedding": v})
	}
	return map[string]any{"data": data}
}

// newTestOpenAIEmbedder is an openai embedder of srv that retries at once.
func newTestOpenAIEmbedder(srv *httptest.Server, dims int, opts ...modelapi.Option) Embedder {
	cfg := EmbeddingConfig{Provider: ProviderOpenAI, Endpoint: srv.URL + "/v1/", Model: "m", Dimensions: dims}
	e, _ := modelapi.NewEmbedder(cfg, "k", srv.Client(), append([]modelapi.Option{modelapi.WithBackoff(time.Millisecond)}, opts...)...)
	return e
}

func TestOpenAIEmbedder(t *testing.T) {
	t.Run("batches and keeps order", func(t *testing.T) {
		srv, calls := embeddingServer(t, func(w http.ResponseWriter, in []string, _ int64) { _ = json.NewEncoder(w).Encode(vectorsFor(in, 8)) })
		e := newTestOpenAIEmbedder(srv, 8, modelapi.WithBatch(3))
		texts := []string{"a", "b", "c", "d", "e", "f", "g"}
		vecs, err := e.Embed(context.Background(), texts)
		if err != nil {
			t.Fatal(err)
		}
		if len(vecs) != 7 || calls.Load() != 3 {
			t.Fatalf("%d vectors in %d calls, want 7 in 3", len(vecs), calls.Load())
		}
		if vecs[4][1] != 1 { // text 4 is index 1 of the second batch
			t.Fatalf("vectors out of order: %v", vecs[4])
		}
	})
	t.Run("retries 429 and 5xx", func(t *testing.T) {
		srv, calls := embeddingServer(t, func(w http.ResponseWriter, in []string, n int64) {
			switch n {
			case 1:
				w.Header().Set("Retry-After", "0")
				http.Error(w, `{"error":{"message":"slow down"}}`, http.StatusTooManyRequests)
			case 2:
				http.Error(w, "oops", http.StatusBadGateway)
			default:
				_ = json.NewEncoder(w).Encode(vectorsFor(in, 8))
			}
		})
		if _, err := newTestOpenAIEmbedder(srv, 8).Embed(context.Background(), []string{"x"}); err != nil || calls.Load() != 3 {
			t.Fatalf("err %v after %d calls, want success after 3", err, calls.Load())
		}
	})
	failures := []struct {
		name    string
		handler func(w http.ResponseWriter, in []string, n int64)
		want    string
		calls   int64
	}{
		{"gives up after retries", func(w http.ResponseWriter, _ []string, _ int64) { http.Error(w, "down", http.StatusServiceUnavailable) }, "503", 4},
		{"no retry on 400", func(w http.ResponseWriter, _ []string, _ int64) {
			http.Error(w, `{"error":{"message":"model not found"}}`, 400)
		}, "model not found", 1},
		{"malformed JSON", func(w http.ResponseWriter, _ []string, _ int64) { _, _ = w.Write([]byte("{not json")) }, "malformed answer", 1},
		{"wrong dimensions", func(w http.ResponseWriter, in []string, _ int64) { _ = json.NewEncoder(w).Encode(vectorsFor(in, 4)) }, "returned 4 dimensions", 1},
		{"too few vectors", func(w http.ResponseWriter, _ []string, _ int64) { _, _ = w.Write([]byte(`{"data":[]}`)) }, "0 vectors for 1", 1},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			srv, calls := embeddingServer(t, tc.handler)
			_, err := newTestOpenAIEmbedder(srv, 8).Embed(context.Background(), []string{"x"})
			if !errors.Is(err, ErrUpstream) || !strings.Contains(err.Error(), tc.want) || calls.Load() != tc.calls {
				t.Fatalf("err = %v after %d calls; want ErrUpstream containing %q after %d", err, calls.Load(), tc.want, tc.calls)
			}
		})
	}
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv, _ := embeddingServer(t, func(w http.ResponseWriter, in []string, _ int64) { <-release })
		defer close(release)
		e := newTestOpenAIEmbedder(srv, 8, modelapi.WithAttempts(50*time.Millisecond, 1))
		start := time.Now()
		_, err := e.Embed(context.Background(), []string{"x"})
		if err == nil || !strings.Contains(err.Error(), "no answer within 50ms") || time.Since(start) > 5*time.Second {
			t.Fatalf("err = %v after %s", err, time.Since(start))
		}
	})
}

func TestOpenAIChatParsesFencedJSON(t *testing.T) {
	chat := newFakeChat(t, func(system, user string) (int, string) {
		return 200, "```json\n{\"action\": \"noop\"}\n```"
	})
	answer, err := chat.llm().CompleteJSON(context.Background(), "s", "u")
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Action string }
	if err := core.DecodeJSONAnswer(answer, &out); err != nil || out.Action != "noop" {
		t.Fatalf("decoded %+v, %v from %q", out, err, answer)
	}
}
