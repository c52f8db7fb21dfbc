package modelapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"unicode/utf8"
)

// Reranker orders documents by relevance to a query.
type Reranker interface {
	// Rerank returns the indexes of docs, most relevant first, with their
	// scores. It may return fewer than len(docs) (the server's top_n);
	// every index is within range and appears once.
	Rerank(ctx context.Context, query string, docs []string) ([]RerankHit, error)
}

// RerankHit is one document's place in a reranker's answer.
type RerankHit struct {
	Index int
	Score float64
}

// Why a rerank call failed, for callers that fall back (errors.Is).
var (
	// ErrRerankMalformed: the server answered 2xx with something that is
	// not a ranking of the documents sent (bad JSON, an index out of
	// range or twice, a score that is not a finite number, too large).
	ErrRerankMalformed = errors.New("malformed rerank answer")
)

// MaxRerankAnswerBytes bounds a rerank answer: 200 documents' index and
// score take a few kilobytes; a server that sends more is refused.
const MaxRerankAnswerBytes = 256 << 10

// RerankConfig configures a /rerank client.
type RerankConfig struct {
	// Endpoint is the full URL of the rerank API.
	Endpoint string
	Model    string
	// API is the field the documents go in: "cohere" ("documents", Cohere
	// and Jina), "tei" ("texts", text-embeddings-inference), empty for
	// both.
	API string
}

// NewReranker returns a client of the /rerank API shared by
// text-embeddings-inference, Jina and Cohere. It never retries: search
// waits for it, and its caller bounds it with a deadline and falls back
// to the first-stage order.
func NewReranker(cfg RerankConfig, apiKey string, client *http.Client) Reranker {
	if client == nil {
		client = &http.Client{}
	}
	return &rerankClient{url: cfg.Endpoint, model: cfg.Model, api: cfg.API, apiKey: apiKey, http: client}
}

type rerankClient struct {
	url, model, api, apiKey string
	http                    *http.Client
}

// rerankRequest is the body the three servers read: TEI reads "texts"
// where Jina and Cohere read "documents"; a client of no named API sends
// both.
type rerankRequest struct {
	Model     string   `json:"model,omitempty"`
	Query     string   `json:"query"`
	Documents []string `json:"documents,omitempty"`
	Texts     []string `json:"texts,omitempty"`
	TopN      int      `json:"top_n"`
}

// request is the body of a rerank call for query and the documents sent.
func (c *rerankClient) request(query string, sent []string) rerankRequest {
	r := rerankRequest{Model: c.model, Query: query, TopN: len(sent)}
	if c.api != "tei" {
		r.Documents = sent
	}
	if c.api != "cohere" {
		r.Texts = sent
	}
	return r
}

// rerankItem is one result: Jina and Cohere send relevance_score, TEI score.
type rerankItem struct {
	Index          *int     `json:"index"`
	RelevanceScore *float64 `json:"relevance_score"`
	Score          *float64 `json:"score"`
}

// MaxRerankDocumentBytes bounds one document sent to the reranker: rerank
// models read about 512 tokens of a document (about 2 KiB of English) and
// cut the rest, so more is only cost. With it, a request of 200 documents
// sent twice (no API named) is at most about 800 KiB before JSON escaping (issue 26,
// twenty-first review: 200 memories of 64 KiB of "<" made one search send
// 150 MiB and allocate 572 MiB).
const MaxRerankDocumentBytes = 2 << 10

// rerankDocuments cuts each document to MaxRerankDocumentBytes on a rune
// boundary.
func rerankDocuments(docs []string) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		if len(d) > MaxRerankDocumentBytes {
			cut := MaxRerankDocumentBytes
			for cut > 0 && !utf8.RuneStart(d[cut]) {
				cut--
			}
			d = d[:cut]
		}
		out[i] = d
	}
	return out
}

func (c *rerankClient) Rerank(ctx context.Context, query string, docs []string) ([]RerankHit, error) {
	sent := rerankDocuments(docs)
	var payload bytes.Buffer
	enc := json.NewEncoder(&payload)
	enc.SetEscapeHTML(false) // "<" stays one byte, not six
	if err := enc.Encode(c.request(query, sent)); err != nil {
		return nil, fmt.Errorf("encoding the rerank request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, &payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUpstream, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUpstream, c.url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxRerankAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: reading the answer: %w", ErrUpstream, c.url, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%w: %s: status %d", ErrUpstream, c.url, resp.StatusCode)
	}
	if len(body) > MaxRerankAnswerBytes {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrRerankMalformed, MaxRerankAnswerBytes)
	}
	items, err := decodeRerank(body)
	if err != nil {
		return nil, err
	}
	return rankOf(items, len(docs))
}

// decodeRerank reads {"results": [...]} (Jina, Cohere) or a bare list (TEI).
func decodeRerank(body []byte) ([]rerankItem, error) {
	var items []rerankItem
	if err := json.Unmarshal(body, &items); err == nil {
		return items, nil
	}
	var wrapped struct {
		Results *[]rerankItem `json:"results"`
	}
	if err := json.Unmarshal(body, &wrapped); err != nil || wrapped.Results == nil {
		return nil, fmt.Errorf("%w: neither a list nor an object with results", ErrRerankMalformed)
	}
	return *wrapped.Results, nil
}

// rankOf checks the items against n documents and orders them by score,
// best first (the server's order breaks ties).
func rankOf(items []rerankItem, n int) ([]RerankHit, error) {
	if len(items) > n {
		return nil, fmt.Errorf("%w: %d results for %d documents", ErrRerankMalformed, len(items), n)
	}
	seen := make([]bool, n)
	out := make([]RerankHit, 0, len(items))
	for i, it := range items {
		score := it.RelevanceScore
		if score == nil {
			score = it.Score
		}
		switch {
		case it.Index == nil || score == nil:
			return nil, fmt.Errorf("%w: result %d lacks index or score", ErrRerankMalformed, i)
		case *it.Index < 0 || *it.Index >= n:
			return nil, fmt.Errorf("%w: index %d out of range 0..%d", ErrRerankMalformed, *it.Index, n-1)
		case seen[*it.Index]:
			return nil, fmt.Errorf("%w: index %d appears twice", ErrRerankMalformed, *it.Index)
		case math.IsNaN(*score) || math.IsInf(*score, 0):
			return nil, fmt.Errorf("%w: score of index %d is not a finite number", ErrRerankMalformed, *it.Index)
		}
		seen[*it.Index] = true
		out = append(out, RerankHit{Index: *it.Index, Score: *score})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Score > out[j].Score })
	return out, nil
}
