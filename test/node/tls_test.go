package node

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// testTLS: a runtime whose spec.service.tls names a kubernetes.io/tls
// Secret (the shape cert-manager writes; here a CA and a certificate for
// the Service made by the test) serves HTTPS from its real Pods: a client
// that trusts only that CA and verifies the Service's name writes and
// reads through the Service, from the host and from a Pod; a client that
// does not trust the CA is refused by its own verification; status.endpoint
// is https.
func (e *env) testTLS(t *testing.T) {
	ctx := scenarioCtx(t, 5*time.Minute)
	ns := e.namespace(t, "tls")
	const name = "secure"
	serverName := naming.ServiceName(name) + "." + ns + ".svc"
	ca, crt, key := issue(t, serverName)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-tls", Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key, "ca.crt": ca},
	}
	if err := e.cl.c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(ns, name, 1, "256Mi")
	rt.Spec.Service.TLS = &memoryv1alpha1.ServiceTLS{SecretName: secret.Name}
	if err := e.cl.c.Create(ctx, rt); err != nil {
		t.Fatal(err)
	}
	rt = e.waitReady(t, ns, name)
	if !strings.HasPrefix(rt.Status.Endpoint, "https://"+serverName+":") {
		t.Errorf("status.endpoint %q, want https://%s:<port>", rt.Status.Endpoint, serverName)
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	s := e.serviceOf(t, ctx, ns, name)
	if e.cl.ours {
		// From the host, at the ClusterIP, naming the Service for the check.
		verified := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12},
		}}
		s.direct(t, ctx, "https", verified)
		got, err := s.add(ctx, "erin", "Erin's memory crossed the wire encrypted")
		if err != nil {
			t.Fatalf("a verifying client through the Service: %v", err)
		}
		var back addedMemory
		if err := s.do(ctx, http.MethodGet, "/v1/owners/erin/memories/"+got.Memory.ID, nil, &back.Memory); err != nil || back.Memory.ID != got.Memory.ID {
			t.Errorf("reading it back over TLS: %v %+v", err, back)
		}
		untrusting := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}, // the system's CAs
		}}
		resp, err := untrusting.Get(s.base + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
		}
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Errorf("a client without the CA: %v, want the certificate refused (unknown authority)", err)
		}
		t.Logf("from the host: %s verified against the test's CA; without the CA: %v", serverName, err)
	}

	// From a Pod of the namespace, by the ClusterIP and the Service's name.
	tb := e.toolbox(t, ns)
	caArg := base64.StdEncoding.EncodeToString(ca)
	code, body, err := tb.call(ctx, "-ca", caArg, "-servername", serverName, "-X", "POST", "-H", "Authorization: Bearer "+s.token,
		"-d", `{"content":"Frank writes over TLS from a Pod","category":"contextual"}`,
		"https://"+s.clusterIP+"/v1/owners/frank/memories")
	if err != nil || code != http.StatusCreated && code != http.StatusOK {
		t.Errorf("a verifying client in a Pod: %d %s %v", code, body, err)
	} else {
		t.Logf("from a Pod: %d over a verified connection to %s", code, serverName)
	}
	_, body, err = tb.call(ctx, "-ca", caArg, "-servername", "someone-else."+ns+".svc", "https://"+s.clusterIP+"/readyz")
	if !errors.Is(err, errNoAnswer) || !strings.Contains(body, "certificate") {
		t.Errorf("a Pod naming another Service: %q %v, want the certificate refused", body, err)
	}
}

// issue makes a CA and a certificate for the DNS names a Service answers
// to inside the cluster (dnsName and its cluster.local form), as PEM.
func issue(t *testing.T, dnsName string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	ca := testenv.NewTestCA(t)
	certPEM, keyPEM = ca.ServerCert(t, time.Now().Add(24*time.Hour), dnsName, dnsName+".cluster.local")
	return ca.PEM, certPEM, keyPEM
}
