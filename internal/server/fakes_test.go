package server

import (
	"encoding/json"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// fakeEmbeddings is an OpenAI-compatible /v1/embeddings server (the one
// third-party API the tests fake). It can hold requests until released, to
// keep a request in flight, or fail them.
type fakeEmbeddings struct {
	srv *httptest.Server
	mu  sync.Mutex
	// block makes requests wait for release; arrived gets one value per
	// blocked request.
	block   bool
	release chan struct{}
	arrived chan struct{}
	// fail answers 400 (not retried by clients) instead of vectors.
	fail bool
	// calls counts the requests that reached /v1/embeddings.
	calls atomic.Int64
}

func newFakeEmbeddings(t *testing.T) *fakeEmbeddings {
	t.Helper()
	f := &fakeEmbeddings{release: make(chan struct{}), arrived: make(chan struct{}, 16)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.unblock()
		f.srv.Close()
	})
	return f
}

func (f *fakeEmbeddings) setBlock(b bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.block = b
}

func (f *fakeEmbeddings) setFail(b bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = b
}

// unblock releases every held request and the ones to come.
func (f *fakeEmbeddings) unblock() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.block = false
	select {
	case <-f.release:
	default:
		close(f.release)
	}
}

func (f *fakeEmbeddings) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	f.calls.Add(1)
	var in struct {
		Input []string `json:"input"`
		Model string   `json:"model"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	block, fail, release := f.block, f.fail, f.release
	f.mu.Unlock()
	if block {
		f.arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	}
	if fail {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"the model is not available"}}`))
		return
	}
	type item struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := struct {
		Data []item `json:"data"`
	}{}
	for i, text := range in.Input {
		out.Data = append(out.Data, item{Index: i, Embedding: hashVector(text, testDims)})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// hashVector is a deterministic vector for text.
func hashVector(text string, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		h := fnv.New32a()
		_, _ = h.Write([]byte{byte(i), byte(i >> 8)})
		_, _ = h.Write([]byte(text))
		v[i] = float32(h.Sum32()%2000)/1000 - 1
	}
	return v
}

// openAIConfig is testConfig with the fake embeddings server.
func (f *fakeEmbeddings) config(schema string) memory.ServiceConfig {
	c := testConfig(schema)
	c.Embedding = memory.EmbeddingConfig{Provider: memory.ProviderOpenAI, Dimensions: testDims, Model: "fake-embed", Endpoint: f.srv.URL + "/v1"}
	return c
}

// fakeChat is an OpenAI-compatible /v1/chat/completions server whose
// answers the test scripts by the system prompt; it counts the calls and
// keeps every request body (to check what reached the model).
type fakeChat struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reply  func(system, user string) string
	calls  atomic.Int64
	bodies []string
}

func newFakeChat(t *testing.T, reply func(system, user string) string) *fakeChat {
	t.Helper()
	f := &fakeChat{reply: reply}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeChat) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	f.calls.Add(1)
	body, err := io.ReadAll(r.Body)
	var in struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}
	if err == nil {
		err = json.Unmarshal(body, &in)
	}
	if err != nil || len(in.Messages) != 2 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, string(body))
	content := f.reply(in.Messages[0].Content, in.Messages[1].Content)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": content}}}})
}

// sent returns every request body received so far.
func (f *fakeChat) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.bodies)
}

// withLLM is cfg with the fake chat server as the runtime's LLM.
func (f *fakeChat) withLLM(cfg memory.ServiceConfig) memory.ServiceConfig {
	cfg.LLM = &memory.LLMConfig{Endpoint: f.srv.URL + "/v1", Model: "fake-chat", Timeout: "30s"}
	return cfg
}
