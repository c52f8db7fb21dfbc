package kubectlengram

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestProxyCallsCarryOnlyTheirParameters: a call through the API server's
// service proxy reaches the memory service with its own query parameters
// and no other. The API server passes every parameter on, and the service
// refuses unknown ones (422); client-go adds "timeout" when the client has
// one (--request-timeout, 30s by default), which made every proxied
// `kubectl engram memories` fail on a real cluster.
func TestProxyCallsCarryOnlyTheirParameters(t *testing.T) {
	var got url.Values
	var path string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, path = r.URL.Query(), r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"items":[]}`))
	}))
	defer api.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := &service{token: "t", k: &kube{cs: cs}, namespace: "team-a", name: "support-bot"}
	var page struct{ Items []any }
	if err := s.call(context.Background(), http.MethodGet, ownerPath("alice", "/memories"), url.Values{"limit": {"20"}}, nil, &page); err != nil {
		t.Fatal(err)
	}
	if want := ProxyPath("team-a", "support-bot", false, "/v1/owners/alice/memories"); path != want {
		t.Errorf("path %q, want %q", path, want)
	}
	if len(got) != 1 || got.Get("limit") != "20" {
		t.Errorf("the service would get the parameters %v, want only limit=20", got)
	}
}
