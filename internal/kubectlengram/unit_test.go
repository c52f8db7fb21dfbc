package kubectlengram

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestProxyPath pins the service proxy URL: the port is picked by its
// name, so spec.service.port never matters, and names are escaped.
func TestProxyPath(t *testing.T) {
	got := ProxyPath("team-a", "support-bot", "/v1/owners/alice%40example.com/memories")
	want := "/api/v1/namespaces/team-a/services/support-bot:http/proxy/v1/owners/alice%40example.com/memories"
	if got != want {
		t.Errorf("ProxyPath = %q, want %q", got, want)
	}
	if p := ownerPath("a/b c", "/search"); p != "/v1/owners/a%2Fb%20c/search" {
		t.Errorf("ownerPath = %q", p)
	}
}

// TestUsage: no arguments prints the usage with exit 2, --help with 0, an
// unknown command names itself.
func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), nil, &out, &errOut); code != 2 || !strings.Contains(out.String(), "kubectl engram status") {
		t.Errorf("no arguments: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := Main(context.Background(), []string{"--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "rotate-credentials") {
		t.Errorf("--help: exit %d", code)
	}
	if code := Main(context.Background(), []string{"frobnicate"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, %q", code, errOut.String())
	}
}
