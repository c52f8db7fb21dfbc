package server

import "net/http"

// HeaderProxyAuthorization carries the service's bearer token when the
// request comes through the Kubernetes API server's service proxy
// (`kubectl engram`): kube-apiserver authenticates the user with the
// Authorization header and then deletes it, so the service's own token
// needs a header of its own. It holds the same "Bearer <token>" value and
// is read only when Authorization is absent.
const HeaderProxyAuthorization = "X-Engram-Authorization"

// requestToken is the bearer token of Authorization, or else of
// X-Engram-Authorization.
func requestToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		return bearer(h)
	}
	return bearer(r.Header.Get(HeaderProxyAuthorization))
}
