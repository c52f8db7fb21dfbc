package kubectlengram

import (
	"context"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestServiceTokenNeverInDebugOutput: with client-go's most verbose debug
// output on (-v=9: request headers and a curl command), a call of the
// memory service through the API server's service proxy prints neither
// the X-Engram-Authorization header's token nor the kubeconfig's bearer
// token, while the API server (here a recording stand-in on 127.0.0.1)
// still receives the service token in that header.
func TestServiceTokenNeverInDebugOutput(t *testing.T) {
	const serviceToken = "engram_SERVICE-token-that-must-never-be-printed-0123456789"
	const userToken = "kubeconfig-USER-token-0123456789"
	var mu sync.Mutex
	var got http.Header
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"items": []}`))
	}))
	t.Cleanup(api.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+api.URL+`"}}]
users: [{name: u, user: {token: "`+userToken+`"}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: team-a}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}

	debug := captureKlog(t, 9)
	a := &app{globals: globals{timeout: 10 * time.Second, rules: &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		overrides: &clientcmd.ConfigOverrides{}}}
	k, err := a.kubeClient()
	if err != nil {
		t.Fatal(err)
	}
	s := &service{token: serviceToken, k: k, namespace: "team-a", name: "support-bot"}
	status, _, err := s.send(context.Background(), http.MethodGet, "/v1/owners/alice/memories", nil, nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("send: %d, %v", status, err)
	}
	klog.Flush()
	out := debug.String()
	if !strings.Contains(out, "curl") || !strings.Contains(out, "/proxy/v1/owners/alice/memories") {
		t.Fatalf("no debug output of the request at -v=9 (the test would prove nothing): %q", out)
	}
	for _, secret := range []string{serviceToken, userToken} {
		if strings.Contains(out, secret) {
			t.Errorf("the debug output holds a token:\n%s", out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if h := got.Get(HeaderProxyAuthorization); h != "Bearer "+serviceToken {
		t.Fatalf("the API server got %s %q, want the service token", HeaderProxyAuthorization, h)
	}
}

// captureKlog sets klog's verbosity to v and collects its output until the
// test ends, when the defaults come back.
func captureKlog(t *testing.T, v int) *testenv.SyncBuffer {
	t.Helper()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	buf := &testenv.SyncBuffer{} // klog writes from goroutines of its own
	for name, value := range map[string]string{"v": strconv.Itoa(v), "logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	klog.SetOutput(buf)
	t.Cleanup(func() {
		klog.Flush()
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(os.Stderr)
	})
	return buf
}

// recordingTransport keeps the last request it was given.
type recordingTransport struct{ last *http.Request }

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.last = req
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

// TestServiceTokenOnlyToTheAPIServer: the token is added to requests for
// the API server's host only (a redirect elsewhere does not carry it), and
// the caller's request is left unchanged.
func TestServiceTokenOnlyToTheAPIServer(t *testing.T) {
	rec := &recordingTransport{}
	rt := wrapServiceToken("api.example:6443")(rec)
	ctx := withServiceToken(context.Background(), "engram_token")
	for url, want := range map[string]string{
		"https://api.example:6443/api/v1/namespaces/a/services/b:http/proxy/v1/owners/x": "Bearer engram_token",
		"https://elsewhere.example/steal":                                                "",
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got := rec.last.Header.Get(HeaderProxyAuthorization); got != want {
			t.Errorf("%s: header %q, want %q", url, got, want)
		}
		if req.Header.Get(HeaderProxyAuthorization) != "" {
			t.Errorf("%s: the caller's request was changed", url)
		}
	}
}
