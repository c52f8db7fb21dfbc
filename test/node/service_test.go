package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/demo"
	"github.com/engram-dev/engram/internal/kubectlengram"
	"github.com/engram-dev/engram/internal/naming"
)

// svc calls one runtime's memory service from the host: at its ClusterIP
// on the node (kube-proxy's rules route it to a Pod), or through the API
// server's service proxy on a user's cluster, whose ClusterIPs the host
// may not reach.
type svc struct {
	base, token string
	clusterIP   string // host:port of the Service inside the cluster
	proxied     bool
	hc          *http.Client
}

// service opens the memory service of runtime name with its admin token.
func (e *env) service(t *testing.T, ns, name string) *svc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := e.serviceOf(t, ctx, ns, name)
	if e.cl.ours {
		out.direct(t, ctx, "http", &http.Client{Timeout: 10 * time.Second})
		return out
	}
	hc, err := rest.HTTPClientFor(e.cl.cfg)
	if err != nil {
		t.Fatal(err)
	}
	hc.Timeout = 10 * time.Second
	out.base, out.hc, out.proxied = strings.TrimRight(e.cl.cfg.Host, "/")+kubectlengram.ProxyPath(ns, naming.ServiceName(name), false, ""), hc, true
	return out
}

// serviceOf reads the Service of runtime name and its admin token; the
// caller says how to reach it.
func (e *env) serviceOf(t *testing.T, ctx context.Context, ns, name string) *svc {
	t.Helper()
	var s corev1.Service
	if err := e.cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.ServiceName(name)}, &s); err != nil {
		t.Fatalf("reading the Service of %s: %v", name, err)
	}
	var sec corev1.Secret
	if err := e.cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.APITokenSecretName(name)}, &sec); err != nil {
		t.Fatalf("reading the API token Secret of %s: %v", name, err)
	}
	tok := auth.TokenWithRole(sec.Data[naming.KeyTokens], auth.RoleAdmin)
	if tok == "" {
		t.Fatalf("no admin token in %s", naming.APITokenSecretName(name))
	}
	return &svc{token: tok, clusterIP: net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(s.Spec.Ports[0].Port)))}
}

// direct calls the Service at its ClusterIP from the host (the node's
// kube-proxy rules route it to a Pod) with hc, once it answers /readyz:
// kube-proxy programs a new Service's rules a moment after its endpoints
// exist (refused until then).
func (s *svc) direct(t *testing.T, ctx context.Context, scheme string, hc *http.Client) {
	t.Helper()
	s.base, s.hc = scheme+"://"+s.clusterIP, hc
	err := poll(ctx, 250*time.Millisecond, func() (bool, error) {
		resp, err := s.hc.Get(s.base + "/readyz")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("the Service at %s: %v", s.base, err)
	}
}

// statusError is an answer other than 2xx.
type statusError struct {
	status     int
	body       string
	retryAfter string // the Retry-After header of a 429
}

func (e *statusError) Error() string { return fmt.Sprintf("%d: %s", e.status, e.body) }

// do sends method path with a JSON body and decodes a 2xx answer into out.
func (s *svc) do(ctx context.Context, method, path string, body, out any) error {
	req, err := demo.JSONRequest(ctx, method, s.base+path, body)
	if err != nil {
		return err
	}
	s.authorize(req)
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := demo.ReadAnswer(resp)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &statusError{status: resp.StatusCode, body: string(raw), retryAfter: resp.Header.Get("Retry-After")}
	}
	if out != nil && len(raw) > 0 {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// doPaced is do for a client reading many things back at once: past the
// token's rate limit (spec.service.limits.rateLimit, 100 a second by
// default) the service answers 429 with Retry-After, and doPaced waits
// that long and asks again, at most a minute in all.
func (s *svc) doPaced(ctx context.Context, method, path string, body, out any) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := s.do(ctx, method, path, body, out)
		var se *statusError
		if !errors.As(err, &se) || se.status != http.StatusTooManyRequests || time.Now().After(deadline) {
			return err
		}
		wait := time.Second
		if secs, convErr := strconv.Atoi(se.retryAfter); convErr == nil && secs > 0 && secs <= 10 {
			wait = time.Duration(secs) * time.Second
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// authorize sets the service token where it survives the way in: the API
// server's proxy replaces Authorization with its own credentials.
func (s *svc) authorize(req *http.Request) {
	if s.proxied {
		req.Header.Set(kubectlengram.HeaderProxyAuthorization, "Bearer "+s.token)
		return
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
}

// RoundTrip lets the MCP client send the service token the same way.
func (s *svc) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	s.authorize(r)
	return s.hc.Transport.RoundTrip(r)
}

// transport is the RoundTripper of the MCP client.
func (s *svc) transport() http.RoundTripper {
	if s.hc.Transport == nil {
		s.hc.Transport = http.DefaultTransport
	}
	return s
}

// addedMemory is the part of an add's answer the suite reads.
type addedMemory struct {
	Action string `json:"action"`
	Memory struct {
		ID      string `json:"id"`
		Content string `json:"content"`
	} `json:"memory"`
}

func (s *svc) add(ctx context.Context, owner, content string) (*addedMemory, error) {
	var res addedMemory
	err := s.do(ctx, http.MethodPost, "/v1/owners/"+owner+"/memories", map[string]any{"content": content, "category": "contextual"}, &res)
	return &res, err
}
