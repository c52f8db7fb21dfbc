package policy

import (
	"errors"
	"fmt"
	"net/url"
	"time"
)

// Reranking is the optional second stage of vector and hybrid search: a
// server with the /rerank API of text-embeddings-inference, Jina and Cohere
// orders the first stage's top candidates. The API key is not part of it:
// it comes from a Secret through the environment.
type Reranking struct {
	// Endpoint is the full URL of the rerank API (…/rerank).
	Endpoint string `json:"endpoint"`
	Model    string `json:"model,omitempty"`
	// API is the request shape: RerankAPICohere, RerankAPITEI, or empty
	// for both fields.
	API string `json:"api,omitempty"`
	// TopN is how many first-stage candidates are reranked.
	TopN int `json:"topN"`
	// Timeout bounds one rerank call: a Go duration such as "2s".
	Timeout string `json:"timeout"`
}

// The request shapes of Reranking.API.
const (
	RerankAPICohere = "cohere" // "documents": Cohere and Jina
	RerankAPITEI    = "tei"    // "texts": text-embeddings-inference
)

// Bounds and defaults of Reranking (the MemoryPolicy CRD has the same).
const (
	DefaultRerankTopN    = 50
	MaxRerankTopN        = 200
	DefaultRerankTimeout = 2 * time.Second
	MinRerankTimeout     = 100 * time.Millisecond
	MaxRerankTimeout     = 30 * time.Second
)

// TimeoutDuration is the parsed Timeout, DefaultRerankTimeout when empty.
func (r Reranking) TimeoutDuration() (time.Duration, error) {
	if r.Timeout == "" {
		return DefaultRerankTimeout, nil
	}
	d, err := time.ParseDuration(r.Timeout)
	if err != nil || d < MinRerankTimeout || d > MaxRerankTimeout {
		return 0, fmt.Errorf("reranking.timeout: %q must be a duration such as 500ms or 2s, within %s..%s", r.Timeout, MinRerankTimeout, MaxRerankTimeout)
	}
	return d, nil
}

// validateReranking checks the reranking section, if any; nil when it is
// absent or sound.
func (p *Policy) validateReranking() error {
	if p.Reranking == nil {
		return nil
	}
	return p.Reranking.validate()
}

// validate checks a reranking section; nil when it is sound.
func (r Reranking) validate() error {
	var errs []error
	if u, err := url.Parse(r.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("reranking.endpoint: %q must be an http or https URL", r.Endpoint))
	}
	if r.API != "" && r.API != RerankAPICohere && r.API != RerankAPITEI {
		errs = append(errs, fmt.Errorf("reranking.api: %q must be %q or %q", r.API, RerankAPICohere, RerankAPITEI))
	}
	if len(r.Model) > 256 {
		errs = append(errs, fmt.Errorf("reranking.model: %d bytes, more than 256", len(r.Model)))
	}
	if r.TopN < 1 || r.TopN > MaxRerankTopN {
		errs = append(errs, fmt.Errorf("reranking.topN: %d must be within 1..%d", r.TopN, MaxRerankTopN))
	}
	if _, err := r.TimeoutDuration(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
