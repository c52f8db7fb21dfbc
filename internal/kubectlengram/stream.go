package kubectlengram

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// stream opens a GET whose answer is read as it arrives (an export),
// direct or through the API server's service proxy. A refusal of the
// service comes back as a *ServiceError.
func (s *service) stream(ctx context.Context, path string, query url.Values) (io.ReadCloser, error) {
	if s.direct != "" {
		return s.streamDirect(ctx, path, query)
	}
	ctx = withServiceToken(ctx, s.token)
	req := s.k.cs.CoreV1().RESTClient().Get().AbsPath(ProxyPath(s.namespace, s.name, s.tls, path)).Timeout(0)
	for k, vs := range query {
		for _, v := range vs {
			req = req.Param(k, v)
		}
	}
	rc, err := req.Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("exporting through the API server's service proxy of %s/%s: %w", s.namespace, s.name, err)
	}
	return rc, nil
}

func (s *service) streamDirect(ctx context.Context, path string, query url.Values) (io.ReadCloser, error) {
	u := s.direct + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("building GET %s: %w", u, err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.httpc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("calling the memory service at %s: %w", s.direct, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		se := &ServiceError{Status: resp.StatusCode}
		if json.Unmarshal(raw, se) != nil || se.Type == "" {
			se.Detail = clip(string(raw), 300)
		}
		return nil, se
	}
	return resp.Body, nil
}
