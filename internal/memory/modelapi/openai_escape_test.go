package modelapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestOpenAIRequestsKeepHTMLCharacters (issue 26, twenty-second review,
// LOW 1): the chat and embeddings requests were encoded by json.Marshal,
// which writes "<", ">" and "&" as six bytes each, so a memory full of them
// reached the model six times its size. They must reach the server as
// they were written.
func TestOpenAIRequestsKeepHTMLCharacters(t *testing.T) {
	var mu sync.Mutex
	bodies := map[string][]byte{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies[r.URL.Path] = raw
		mu.Unlock()
		switch r.URL.Path {
		case "/v1/chat/completions":
			_, _ = w.Write([]byte(`{"choices": [{"message": {"content": "{}"}}]}`))
		case "/v1/embeddings":
			_, _ = w.Write([]byte(`{"data": [{"index": 0, "embedding": [1, 0]}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	text := strings.Repeat("<a> & <b>", 100)
	llm := NewLLM(LLMConfig{Endpoint: srv.URL + "/v1", Model: "m"}, "", srv.Client())
	if _, err := llm.CompleteJSON(t.Context(), "system <&>", text); err != nil {
		t.Fatalf("chat: %v", err)
	}
	emb, err := NewEmbedder(EmbeddingConfig{Provider: ProviderOpenAI, Endpoint: srv.URL + "/v1", Model: "e", Dimensions: 2}, "", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := emb.Embed(t.Context(), []string{text}); err != nil {
		t.Fatalf("embeddings: %v", err)
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
		raw := bodies[path]
		if !bytes.Contains(raw, []byte(text)) || bytes.Contains(raw, []byte(`\u003c`)) || bytes.Contains(raw, []byte(`\u0026`)) {
			t.Errorf("%s: the server read %d bytes for a text of %d, escaped: %.120s", path, len(raw), len(text), raw)
		}
		if len(raw) > len(text)+512 {
			t.Errorf("%s: a request of %d bytes for a text of %d", path, len(raw), len(text))
		}
	}
}
