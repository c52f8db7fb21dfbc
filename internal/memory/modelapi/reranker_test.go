package modelapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestRerankRequestIsBounded (issue 26, twenty-first review, HIGH 1): the
// request carried every candidate whole, twice, with each "<" escaped to
// six bytes: 200 memories of 64 KiB made one search send 150 MiB. Now each
// document is cut to MaxRerankDocumentBytes on a rune boundary and sent
// unescaped.
func TestRerankRequestIsBounded(t *testing.T) {
	var got int
	var body rerankRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		got = len(raw)
		_ = json.Unmarshal(raw, &body)
		_, _ = w.Write([]byte(`{"results": [{"index": 0, "relevance_score": 1}]}`))
	}))
	defer srv.Close()
	docs := make([]string, 200)
	for i := range docs {
		docs[i] = strings.Repeat("<é", 32<<10) // 96 KiB, runes of one and two bytes
	}
	// The fake answers one result whatever it is sent: the request is
	// what this test measures.
	_, _ = NewReranker(RerankConfig{Endpoint: srv.URL}, "", srv.Client()).Rerank(t.Context(), "q", docs)
	if len(body.Documents) != 200 {
		t.Fatalf("the server read %d documents, want 200", len(body.Documents))
	}
	if limit := 2*200*MaxRerankDocumentBytes + 64<<10; got > limit {
		t.Fatalf("a request of 200 documents of 96 KiB is %d bytes, want at most %d", got, limit)
	}
	for _, d := range body.Documents {
		if len(d) > MaxRerankDocumentBytes || !utf8.ValidString(d) {
			t.Fatalf("a document of %d bytes (valid UTF-8: %v) was sent", len(d), utf8.ValidString(d))
		}
	}
}

// TestRerankRequestSendsTheNamedAPIsFieldOnly (a LOW of issue 26): a
// client whose policy names the server's API sends the documents once, in
// the field that server reads; a client of no named API sends both.
func TestRerankRequestSendsTheNamedAPIsFieldOnly(t *testing.T) {
	for api, want := range map[string][]string{"cohere": {"documents"}, "tei": {"texts"}, "": {"documents", "texts"}} {
		var fields map[string]json.RawMessage
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			raw, _ := io.ReadAll(r.Body)
			fields = nil
			_ = json.Unmarshal(raw, &fields)
			_, _ = w.Write([]byte(`{"results": [{"index": 0, "relevance_score": 1}, {"index": 1, "relevance_score": 0.5}]}`))
		}))
		hits, err := NewReranker(RerankConfig{Endpoint: srv.URL, API: api}, "", srv.Client()).Rerank(t.Context(), "q", []string{"a", "b"})
		srv.Close()
		if err != nil || len(hits) != 2 {
			t.Fatalf("api %q: %v, %v", api, hits, err)
		}
		for _, f := range []string{"documents", "texts"} {
			_, sent := fields[f]
			if sent != slices.Contains(want, f) {
				t.Errorf("api %q: field %q sent = %v, want the fields %q", api, f, sent, want)
			}
		}
	}
}
