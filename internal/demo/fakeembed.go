package demo

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// FakeEmbedderDims is the size of the fake's vectors: the samples' runtime's
// (config/samples), which the re-embed step's runtime copies.
const FakeEmbedderDims = 384

// EmbedderServer is where an OpenAI-compatible embeddings server answers
// and the key it wants; the re-embed step gives the key to the runtime
// through a Secret, as a user would.
type EmbedderServer struct {
	URL    string // base URL including /v1
	APIKey string
}

// FakeEmbedder is an OpenAI-compatible POST /v1/embeddings server on
// 127.0.0.1 that stands in for a real model server (the demo downloads no
// model). Every model name is a model of its own: the builtin embedder's
// vector with its dimensions permuted and signs flipped by a seed drawn
// from the name. Texts keep their similarities under one model, and the
// vectors of two models cannot be compared, as with real models. The
// demo's local pods are processes of this machine, so they reach it on
// 127.0.0.1; the pods of a real node (make demo-node) cannot.
type FakeEmbedder struct {
	Server  EmbedderServer
	srv     *http.Server
	builtin memory.Embedder

	mu    sync.Mutex
	texts map[string]int64 // model -> texts embedded
	perms map[string][]int32
}

// maxFakeInputs bounds one request (the service and the Job send at most 256).
const maxFakeInputs = 2048

// StartFakeEmbedder listens on a free port of 127.0.0.1 and serves until Close.
func StartFakeEmbedder(apiKey string) (*FakeEmbedder, error) {
	builtin, err := memory.NewBuiltinEmbedder(FakeEmbedderDims)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the fake embedder: %w", err)
	}
	f := &FakeEmbedder{builtin: builtin, texts: map[string]int64{}, perms: map[string][]int32{}}
	f.Server = EmbedderServer{URL: "http://" + ln.Addr().String() + "/v1", APIKey: apiKey}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/embeddings", f.embeddings)
	mux.HandleFunc("GET /v1/demo/texts", f.stats)
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

// Close stops the server.
func (f *FakeEmbedder) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return f.srv.Shutdown(ctx)
}

// Texts is how many texts the fake embedded with model.
func (f *FakeEmbedder) Texts(model string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.texts[model]
}

func (f *FakeEmbedder) embeddings(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+f.Server.APIKey)) != 1 {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"invalid API key"}}`))
		return
	}
	var in struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<20)).Decode(&in); err != nil || in.Model == "" || len(in.Input) > maxFakeInputs {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"want {\"model\": ..., \"input\": [at most 2048 texts]}"}}`))
		return
	}
	vecs, err := f.builtin.Embed(r.Context(), in.Input)
	if err != nil {
		http.Error(w, `{"error":{"message":"embedding failed"}}`, http.StatusInternalServerError)
		return
	}
	perm := f.permutation(in.Model)
	type item struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := struct {
		Model string `json:"model"`
		Data  []item `json:"data"`
	}{Model: in.Model, Data: make([]item, len(vecs))}
	for i, v := range vecs {
		out.Data[i] = item{Index: i, Embedding: permute(v, perm)}
	}
	f.mu.Lock()
	f.texts[in.Model] += int64(len(in.Input))
	f.mu.Unlock()
	_ = json.NewEncoder(w).Encode(out)
}

// stats answers {"texts": {model: count}} for the demo's report.
func (f *FakeEmbedder) stats(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"texts": f.texts})
}

// permutation of the dimensions for model: index i goes to |p[i]|-1, its
// sign flipped when p[i] < 0.
func (f *FakeEmbedder) permutation(model string) []int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.perms[model]; ok {
		return p
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(model))
	rng := rand.New(rand.NewPCG(h.Sum64(), 29))
	p := make([]int32, FakeEmbedderDims)
	for i, j := range rng.Perm(FakeEmbedderDims) {
		p[i] = int32(j + 1)
		if rng.IntN(2) == 0 {
			p[i] = -p[i]
		}
	}
	f.perms[model] = p
	return p
}

func permute(v []float32, p []int32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		j := p[i]
		if j < 0 {
			out[-j-1] = -x
		} else {
			out[j-1] = x
		}
	}
	return out
}

// fakeTexts reads the fake's counts over HTTP (the make demo fake runs in
// the supervisor, not in the process that plays the scenario).
func fakeTexts(ctx context.Context, e EmbedderServer, model string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/demo/texts", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading the fake embedder's counts: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		Texts map[string]int64 `json:"texts"`
	}
	if resp.StatusCode != http.StatusOK {
		return 0, errors.New("reading the fake embedder's counts: " + resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("decoding the fake embedder's counts: %w", err)
	}
	return out.Texts[model], nil
}
