package kubectlengram

import (
	"context"
	"net/http"
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
// context (withServiceToken) on its way to the API server.
type serviceTokenTransport struct{ next http.RoundTripper }

func (t serviceTokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	token, _ := r.Context().Value(serviceTokenKey{}).(string)
	if token == "" {
		return t.next.RoundTrip(r)
	}
	r = r.Clone(r.Context()) // a RoundTripper must not change the caller's request
	r.Header.Set(HeaderProxyAuthorization, "Bearer "+token)
	return t.next.RoundTrip(r)
}

// wrapServiceToken is the rest.Config wrapper that installs it.
func wrapServiceToken(rt http.RoundTripper) http.RoundTripper { return serviceTokenTransport{next: rt} }
