package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// API is a small client of the memory service's REST API (docs/api.md).
type API struct {
	Base  string // e.g. http://127.0.0.1:40123
	Token string
	HTTP  *http.Client
}

// Problem is an RFC 9457 problem body.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

// StatusError is a non-2xx answer with its problem.
type StatusError struct {
	Status  int
	Problem Problem
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Problem.Title, e.Problem.Detail)
}

// Do sends method path with body (JSON, when not nil) and decodes a 2xx
// answer into out; other statuses return a *StatusError.
func (a *API) Do(ctx context.Context, method, path string, body, out any) error {
	req, err := JSONRequest(ctx, method, a.Base+path, body)
	if err != nil {
		return err
	}
	raw, err := a.send(req)
	if err != nil {
		return err
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
		}
	}
	return nil
}

// Raw sends method path with body as contentType (none when body is nil)
// and returns a 2xx answer's body as it is (an export's JSON Lines); other
// statuses return a *StatusError.
func (a *API) Raw(ctx context.Context, method, path, contentType string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.Base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	return a.send(req)
}

// send adds the token, sends req and returns a 2xx answer's body.
func (a *API) send(req *http.Request) ([]byte, error) {
	req.Header.Set("Authorization", "Bearer "+a.Token)
	hc := a.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, err := ReadAnswer(resp)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		e := &StatusError{Status: resp.StatusCode}
		_ = json.Unmarshal(raw, &e.Problem)
		return nil, e
	}
	return raw, nil
}

// JSONRequest is a request of method to url carrying body as JSON (no
// body when nil); the caller adds its credentials.
func JSONRequest(ctx context.Context, method, url string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encoding the %s %s body: %w", method, url, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// maxAnswer bounds what ReadAnswer reads: no answer of the API is near it,
// and a wrong server cannot make a client hold more.
const maxAnswer = 8 << 20

// ReadAnswer reads resp's body, at most maxAnswer bytes.
func ReadAnswer(resp *http.Response) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s %s: %w", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return raw, nil
}
