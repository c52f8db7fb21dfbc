package kubectlengram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/naming"
)

// HeaderProxyAuthorization is where the service token travels: the API
// server deletes Authorization after authenticating the user, so the
// service also reads this header (internal/server).
const HeaderProxyAuthorization = "X-Engram-Authorization"

// service calls one runtime's memory service, through the API server's
// service proxy or directly at --url.
type service struct {
	token string
	// direct is the --url base; empty means the service proxy.
	direct string
	httpc  *http.Client
	// proxy: the core REST client of the cluster and the Service's place.
	k         *kube
	namespace string
	name      string
	tls       bool // the Service's port is https
}

// ProxyPath is the API server path that reaches path on the runtime's
// Service through the service proxy ("<name>:<port name>" picks the port
// by name, so spec.service.port does not matter). With tls the service
// serves HTTPS on its port "https", and the "https:" prefix makes the API
// server speak TLS to it (the API server does not verify the service's
// certificate: the proxy authenticates the user, the service the token).
func ProxyPath(namespace, service string, tls bool, path string) string {
	ref := url.PathEscape(service) + ":" + naming.PortName
	if tls {
		ref = "https:" + url.PathEscape(service) + ":" + naming.PortNameTLS
	}
	return fmt.Sprintf("/api/v1/namespaces/%s/services/%s/proxy%s", url.PathEscape(namespace), ref, path)
}

// servesTLS reports whether the runtime's service serves HTTPS, from the
// endpoint the operator published (which follows the Service it applied).
func servesTLS(rt *memoryv1alpha1.MemoryRuntime) bool {
	return strings.HasPrefix(rt.Status.Endpoint, "https://")
}

// serviceFor opens the memory service of runtime name. Without --url the
// runtime must be Ready; the token is --service-token or the admin token of
// the runtime's API token Secret (read with the user's own RBAC).
func (a *app) serviceFor(ctx context.Context, name string) (*service, error) {
	s := &service{token: a.serviceToken, direct: strings.TrimRight(a.url, "/"), httpc: &http.Client{Timeout: a.timeout}}
	if s.direct != "" && s.token != "" {
		return s, nil // nothing to read from the cluster
	}
	k, rt, err := a.runtime(ctx, name)
	if err != nil {
		return nil, err
	}
	if s.direct == "" {
		if err := checkReady(rt); err != nil {
			return nil, err
		}
	}
	return a.openService(ctx, k, rt)
}

// openService builds the service client of a runtime already read.
func (a *app) openService(ctx context.Context, k *kube, rt *memoryv1alpha1.MemoryRuntime) (*service, error) {
	s := &service{token: a.serviceToken, direct: strings.TrimRight(a.url, "/"), httpc: &http.Client{Timeout: a.timeout},
		k: k, namespace: rt.Namespace, name: naming.ServiceName(rt.Name), tls: servesTLS(rt)}
	if s.token == "" {
		tok, err := adminToken(ctx, k, rt)
		if err != nil {
			return nil, err
		}
		s.token = tok
	}
	return s, nil
}

// checkReady fails with the Ready condition's reason and message unless
// the runtime serves.
func checkReady(rt *memoryv1alpha1.MemoryRuntime) error {
	c := rt.GetCondition(memoryv1alpha1.ConditionReady)
	switch {
	case c == nil:
		return fmt.Errorf("memoryruntime %s/%s is not Ready yet: the operator has not reported on it (is the operator running?)", rt.Namespace, rt.Name)
	case c.Status != metav1.ConditionTrue:
		return fmt.Errorf("memoryruntime %s/%s is not Ready yet: %s: %s", rt.Namespace, rt.Name, c.Reason, c.Message)
	}
	return nil
}

// adminToken reads the runtime's token Secret and picks its admin token.
func adminToken(ctx context.Context, k *kube, rt *memoryv1alpha1.MemoryRuntime) (string, error) {
	name := rt.Status.APITokenSecret
	if name == "" {
		name = naming.APITokenSecretName(rt.Name)
	}
	var sec corev1.Secret
	if err := k.c.Get(ctx, client.ObjectKey{Namespace: rt.Namespace, Name: name}, &sec); err != nil {
		return "", apiError(err, "get", resSecrets, rt.Namespace, name)
	}
	tok := auth.TokenWithRole(sec.Data[naming.KeyTokens], auth.RoleAdmin)
	if tok == "" {
		return "", fmt.Errorf("secret %s/%s holds no admin token (key %q); pass --service-token", rt.Namespace, name, naming.KeyTokens)
	}
	return tok, nil
}

// ServiceError is a refusal of the memory service (an RFC 9457 problem).
type ServiceError struct {
	Status int
	Type   string `json:"type"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

func (e *ServiceError) Error() string {
	msg := fmt.Sprintf("the memory service answered %d", e.Status)
	if e.Title != "" {
		msg += " " + e.Title
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// call sends one request and decodes a 2xx JSON answer into out.
func (s *service) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	var payload []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding the request: %w", err)
		}
		payload = b
	}
	status, raw, err := s.send(ctx, method, path, query, payload)
	if err != nil {
		return err
	}
	if status >= 300 {
		se := &ServiceError{Status: status}
		_ = json.Unmarshal(raw, se)
		if se.Type == "" && se.Title == "" {
			se.Detail = clip(string(raw), 300)
		}
		return se
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding the answer of %s %s: %w", method, path, err)
	}
	return nil
}

// send is one exchange of a JSON body, direct or through the proxy.
func (s *service) send(ctx context.Context, method, path string, query url.Values, payload []byte) (int, []byte, error) {
	return s.sendAs(ctx, method, path, query, payload, "application/json")
}

// sendAs is one exchange of a body of media type contentType.
func (s *service) sendAs(ctx context.Context, method, path string, query url.Values, payload []byte, contentType string) (int, []byte, error) {
	if s.direct != "" {
		return s.sendDirect(ctx, method, path, query, payload, contentType)
	}
	// The token goes in through the context, not SetHeader: see proxytoken.go.
	// Timeout(0): client-go would add its request timeout as a "timeout"
	// query parameter, which the API server passes on to the memory
	// service, which refuses unknown parameters (422). The HTTP client's
	// own timeout (--request-timeout) still bounds the call.
	ctx = withServiceToken(ctx, s.token)
	req := s.k.cs.CoreV1().RESTClient().Verb(method).AbsPath(ProxyPath(s.namespace, s.name, s.tls, path)).
		Timeout(0)
	for k, vs := range query {
		for _, v := range vs {
			req = req.Param(k, v)
		}
	}
	if payload != nil {
		req = req.SetHeader("Content-Type", contentType).Body(payload)
	}
	res := req.Do(ctx)
	var status int
	res.StatusCode(&status)
	raw, err := res.Raw()
	if err != nil && status == 0 {
		return 0, nil, fmt.Errorf("reaching service %s/%s through the API server: %w", s.namespace, s.name, err)
	}
	switch {
	case status == http.StatusForbidden && !isProblem(raw):
		return 0, nil, &ForbiddenError{Verb: proxyVerb(method), Resource: resServiceProxy, Namespace: s.namespace, Err: err}
	case status >= 300 && !isProblem(raw):
		// The API server's own answer (a Status), not the service's.
		var st metav1.Status
		msg := clip(string(raw), 300)
		if json.Unmarshal(raw, &st) == nil && st.Message != "" {
			msg = st.Message
		}
		return 0, nil, fmt.Errorf("the API server's service proxy could not reach service %s/%s (%d): %s; with no pod network between the API server and the pods, use --url", s.namespace, s.name, status, msg)
	}
	return status, raw, nil
}

func (s *service) sendDirect(ctx context.Context, method, path string, query url.Values, payload []byte, contentType string) (int, []byte, error) {
	u := s.direct + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, nil, fmt.Errorf("building %s %s: %w", method, u, err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	if payload != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := s.httpc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("calling the memory service at %s: %w", s.direct, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer of %s: %w", u, err)
	}
	return resp.StatusCode, raw, nil
}

// isProblem tells the service's own problem+json from the API server's Status.
func isProblem(raw []byte) bool {
	var p struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &p) == nil && strings.HasPrefix(p.Type, "https://engram.dev/problems/")
}

// proxyVerb is the RBAC verb of a proxied request with that HTTP method.
func proxyVerb(method string) string {
	switch method {
	case http.MethodGet:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodDelete:
		return "delete"
	case http.MethodPatch:
		return "patch"
	}
	return strings.ToLower(method)
}

// ownerPath is /v1/owners/{owner} plus rest, the owner escaped.
func ownerPath(owner string, rest ...string) string {
	return "/v1/owners/" + url.PathEscape(owner) + strings.Join(rest, "")
}

// stats reads the admin stats of a runtime for `status`.
func (a *app) stats(ctx context.Context, k *kube, rt *memoryv1alpha1.MemoryRuntime) (*statsResult, error) {
	if a.url == "" {
		if err := checkReady(rt); err != nil {
			return nil, errors.New("the service is not serving: " + err.Error())
		}
	}
	s, err := a.openService(ctx, k, rt)
	if err != nil {
		return nil, err
	}
	var st statsResult
	if err := s.call(ctx, http.MethodGet, "/v1/stats", nil, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}
