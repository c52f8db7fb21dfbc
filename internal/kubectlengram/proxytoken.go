package kubectlengram

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/client-go/rest"
)

// The service token travels to the memory service in
// X-Engram-Authorization (HeaderProxyAuthorization). client-go's debug
// output (-v=7 and up: request headers, and at -v=9 a curl command) masks
// only Authorization, so a token set on the request would be printed in
// full. The token is therefore carried in the request's context and put
// into the header by a round tripper that client-go runs below its debug
// layer (rest.Config.WrapTransport is applied before DebugWrappers): the
// debug output never holds the header at all.

type serviceTokenKey struct{}

// withServiceToken makes the requests sent with ctx carry token.
func withServiceToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, serviceTokenKey{}, token)
}

// serviceTokenTransport sets HeaderProxyAuthorization from the request's
// context (withServiceToken) on its way to the API server at host, and to
// no other host (a redirect elsewhere does not get the token).
type serviceTokenTransport struct {
	next http.RoundTripper
	host string
}

func (t serviceTokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	token, _ := r.Context().Value(serviceTokenKey{}).(string)
	if token == "" || r.URL.Host != t.host {
		return t.next.RoundTrip(r)
	}
	r = r.Clone(r.Context()) // a RoundTripper must not change the caller's request
	r.Header.Set(HeaderProxyAuthorization, "Bearer "+token)
	return t.next.RoundTrip(r)
}

// wrapServiceToken is the rest.Config wrapper that installs it for the
// API server at host (host:port, as in request URLs).
func wrapServiceToken(host string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper { return serviceTokenTransport{next: rt, host: host} }
}

// apiHost is the host:port of cfg's API server as it appears in request
// URLs (rest.DefaultServerURL: the scheme's port is not added).
func apiHost(cfg *rest.Config) (string, error) {
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return "", fmt.Errorf("reading the API server URL %q: %w", cfg.Host, err)
	}
	return u.Host, nil
}
