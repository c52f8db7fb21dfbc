package modelapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrUpstream: an embedding or chat model server failed (after retries).
var ErrUpstream = errors.New("model server failed")

// openAIClient speaks the OpenAI HTTP API (as OpenAI, Ollama, vLLM, TEI and
// LiteLLM serve it): JSON POSTs with a bearer key, retried with backoff on
// 429 and 5xx.
type openAIClient struct {
	base    string // base URL including /v1, no trailing slash
	apiKey  string
	http    *http.Client
	timeout time.Duration // per attempt
	retries int           // attempts after the first
	backoff time.Duration // first retry delay, doubled each time
	batch   int           // texts per embeddings request
}

func newOpenAIClient(endpoint, apiKey string, client *http.Client) *openAIClient {
	if client == nil {
		client = &http.Client{}
	}
	return &openAIClient{
		base:    strings.TrimRight(endpoint, "/"),
		apiKey:  apiKey,
		http:    client,
		timeout: 15 * time.Second,
		retries: 3,
		backoff: 500 * time.Millisecond,
		batch:   64,
	}
}

// with applies opts, after the defaults and the config's settings.
func (c *openAIClient) with(opts []Option) *openAIClient {
	for _, o := range opts {
		o(c)
	}
	return c
}

// maxOpenAIAnswerBytes bounds one answer read from the server. The largest
// legitimate answers are an embeddings batch (64 vectors of up to 4,096
// floats as JSON text: about 7 MiB) and an extraction of 100 facts of
// up to 64 KiB each; a server that sends more is refused, not read.
const maxOpenAIAnswerBytes = 64 << 20

// encodeRequest is body as JSON without HTML escaping: json.Marshal writes
// "<", ">" and "&" as six bytes each (\u003c), so stored text full of them
// would grow six-fold on its way to the model (issue 26, twenty-second
// review, LOW 1). A JSON server reads both forms alike.
func encodeRequest(body any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	return buf.Bytes(), nil
}

// post sends body to base+path and decodes the JSON answer into out,
// retrying transient failures.
func (c *openAIClient) post(ctx context.Context, path string, body, out any) error {
	payload, err := encodeRequest(body)
	if err != nil {
		return err
	}
	url := c.base + path
	var lastErr error
	for attempt := 0; attempt <= c.retries; attempt++ {
		if attempt > 0 {
			if err := Sleep(ctx, c.delay(attempt, lastErr)); err != nil {
				return fmt.Errorf("%w: %s: %v (gave up: %v)", ErrUpstream, url, lastErr, err)
			}
		}
		retry, err := c.attempt(ctx, url, payload, out)
		if err == nil {
			return nil
		}
		lastErr = err
		if !retry || ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("%w: %s: %v", ErrUpstream, url, lastErr)
}

// httpStatusError is a non-2xx answer; retryAfter is its Retry-After.
type httpStatusError struct {
	status     int
	message    string
	retryAfter time.Duration
}

func (e *httpStatusError) Error() string {
	return fmt.Sprintf("answered %d %s: %s", e.status, http.StatusText(e.status), e.message)
}

func (c *openAIClient) attempt(ctx context.Context, url string, payload []byte, out any) (retry bool, err error) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if actx.Err() != nil && ctx.Err() == nil {
			return true, fmt.Errorf("no answer within %s", c.timeout)
		}
		return true, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOpenAIAnswerBytes+1))
	if err != nil {
		return true, fmt.Errorf("reading answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		e := &httpStatusError{status: resp.StatusCode, message: errorMessage(body)}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			e.retryAfter = time.Duration(s) * time.Second
		}
		return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500, e
	}
	if len(body) > maxOpenAIAnswerBytes {
		return false, fmt.Errorf("answer larger than %d MiB", maxOpenAIAnswerBytes>>20)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return false, fmt.Errorf("malformed answer (not the expected JSON): %v", err)
	}
	return false, nil
}

// delay is the wait before retry attempt n: Retry-After when the server gave
// one (capped at 10 s), else exponential backoff with jitter.
func (c *openAIClient) delay(n int, last error) time.Duration {
	var se *httpStatusError
	if errors.As(last, &se) && se.retryAfter > 0 {
		return min(se.retryAfter, 10*time.Second)
	}
	d := c.backoff << (n - 1)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// errorMessage extracts {"error":{"message":...}} or returns the body, cut short.
func errorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// Sleep waits d or until ctx is done (then returns ctx.Err()). The façade
// exports it as memory.Sleep for the packages outside the engine.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// openAIEmbedder calls POST {endpoint}/embeddings.
type openAIEmbedder struct {
	client *openAIClient
	model  string
	dims   int
}

func (e *openAIEmbedder) Dimensions() int { return e.dims }

func (e *openAIEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += e.client.batch {
		part := texts[start:min(start+e.client.batch, len(texts))]
		vecs, err := e.embedBatch(ctx, part)
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func (e *openAIEmbedder) embedBatch(ctx context.Context, texts []string) ([][]float32, error) {
	var resp struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	req := map[string]any{"model": e.model, "input": texts, "encoding_format": "float"}
	if err := e.client.post(ctx, "/embeddings", req, &resp); err != nil {
		return nil, fmt.Errorf("embedding %d texts with %q: %w", len(texts), e.model, err)
	}
	if len(resp.Data) != len(texts) {
		return nil, fmt.Errorf("%w: embedding server returned %d vectors for %d texts", ErrUpstream, len(resp.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("%w: embedding server returned a bad index %d", ErrUpstream, d.Index)
		}
		if len(d.Embedding) != e.dims {
			return nil, fmt.Errorf("%w: model %q returned %d dimensions but the runtime's embedding.dimensions is %d; set embedding.dimensions to %d (on a runtime with vectors the change re-embeds them) or choose a model with %d",
				ErrUpstream, e.model, len(d.Embedding), e.dims, len(d.Embedding), e.dims)
		}
		// A vector without a direction (all zeros, say) would make every
		// search of its owner fail once stored (issue 26, seventeenth
		// review, MEDIUM 1): the server's answer is at fault.
		if msg := VectorDirection(d.Embedding); msg != "" {
			return nil, fmt.Errorf("%w: model %q returned a vector for text %d that %s", ErrUpstream, e.model, d.Index, msg)
		}
		out[d.Index] = d.Embedding
	}
	return out, nil
}

// openAIChat calls POST {endpoint}/chat/completions asking for JSON.
type openAIChat struct {
	client *openAIClient
	model  string
}

func (c *openAIChat) CompleteJSON(ctx context.Context, system, user string) (string, error) {
	var resp struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	req := map[string]any{
		"model":           c.model,
		"temperature":     0,
		"response_format": map[string]string{"type": "json_object"},
		"messages": []map[string]string{
			{"role": "system", "content": system},
			{"role": "user", "content": user},
		},
	}
	if err := c.client.post(ctx, "/chat/completions", req, &resp); err != nil {
		return "", fmt.Errorf("asking %q: %w", c.model, err)
	}
	if len(resp.Choices) == 0 {
		return "", fmt.Errorf("%w: chat server returned no choices", ErrUpstream)
	}
	return resp.Choices[0].Message.Content, nil
}

// NewEmbedder returns the embedder of cfg. apiKey is sent as a bearer token
// by the openai provider; client nil means a default http.Client.
func NewEmbedder(cfg EmbeddingConfig, apiKey string, client *http.Client, opts ...Option) (Embedder, error) {
	switch cfg.Provider {
	case ProviderBuiltin, "":
		return NewBuiltinEmbedder(cfg.Dimensions)
	case ProviderOpenAI:
		if cfg.Endpoint == "" || cfg.Model == "" || cfg.Dimensions < 1 {
			return nil, errors.New("openai embedder: endpoint, model and dimensions are required")
		}
		return &openAIEmbedder{client: newOpenAIClient(cfg.Endpoint, apiKey, client).with(opts), model: cfg.Model, dims: cfg.Dimensions}, nil
	}
	return nil, fmt.Errorf("unknown embedding provider %q (builtin or openai)", cfg.Provider)
}

// NewLLM returns an OpenAI-compatible chat client for cfg. One attempt may
// take the whole of cfg's timeout (a slow local model answers in one long
// attempt); the store's bound of the call, retries included, is the same
// timeout. An invalid timeout (Validate refuses it) counts as the default.
func NewLLM(cfg LLMConfig, apiKey string, client *http.Client, opts ...Option) LLM {
	c := newOpenAIClient(cfg.Endpoint, apiKey, client)
	if d, err := cfg.TimeoutDuration(); err == nil {
		c.timeout = d
	} else {
		c.timeout = DefaultLLMTimeout
	}
	return &openAIChat{client: c.with(opts), model: cfg.Model}
}
