package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// apiClient calls the memory service's REST API the way an agent would:
// JSON over HTTP/1.1 with keep-alive and a bearer token.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

func newAPIClient(base, token string) *apiClient { //nolint:unparam // the token is the caller's, though all use benchToken today
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: time.Minute}
	return &apiClient{base: base, token: token, http: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

// post sends body as JSON and decodes a 2xx answer into out (unless nil).
func (c *apiClient) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("POST %s: reading the answer: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %d: %s", path, resp.StatusCode, truncate(string(raw), 300))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("POST %s: decoding the answer: %w", path, err)
	}
	return nil
}

func ownerPath(owner, rest string) string { return "/v1/owners/" + url.PathEscape(owner) + rest }

// Shapes of the answers the harness reads (a subset of the API's).
type (
	apiMemory struct {
		ID       string `json:"id"`
		Owner    string `json:"owner"`
		Category string `json:"category"`
	}
	apiAddResult struct {
		Action string    `json:"action"`
		Memory apiMemory `json:"memory"`
	}
	apiBatchResult struct {
		Results []apiAddResult `json:"results"`
	}
	apiSearchResult struct {
		Results []struct {
			Memory      apiMemory `json:"memory"`
			Score       float64   `json:"score"`
			VectorScore float64   `json:"vectorScore"`
		} `json:"results"`
	}
	apiContextResult struct {
		Text   string   `json:"text"`
		Tokens int      `json:"tokens"`
		IDs    []string `json:"ids"`
	}
)

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
