package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// tlsDir holds tls.crt and tls.key the way the kubelet mounts a Secret:
// the files are symbolic links into a directory that a new version
// replaces in one rename, so a reader never sees a new certificate with
// an old key.
type tlsDir struct {
	t       *testing.T
	dir     string
	version int
}

func newTLSDir(t *testing.T, certPEM, keyPEM []byte) *tlsDir {
	d := &tlsDir{t: t, dir: t.TempDir()}
	d.write(certPEM, keyPEM)
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(d.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// write publishes a new pair atomically (the kubelet's ..data swap).
func (d *tlsDir) write(certPEM, keyPEM []byte) {
	d.t.Helper()
	d.version++
	version := filepath.Join(d.dir, "..v"+time.Now().Format("150405.000000000"))
	if err := os.Mkdir(version, 0o700); err != nil {
		d.t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(version, name), data, 0o600); err != nil {
			d.t.Fatal(err)
		}
	}
	tmp := filepath.Join(d.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, "..data")); err != nil {
		d.t.Fatal(err)
	}
}

func (d *tlsDir) args() []string {
	return []string{"--tls-cert-file=" + filepath.Join(d.dir, "tls.crt"), "--tls-key-file=" + filepath.Join(d.dir, "tls.key")}
}

// useTLS points the test server's client at https with a client that
// trusts ca only.
func (s *testServer) useTLS(ca *testenv.TestCA) {
	s.base = "https://" + s.proc.Addr().String()
	s.client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12},
	}}
}

// servedSerial is the serial number of the certificate the server
// presents, read by a client that verifies it against ca.
func servedSerial(t *testing.T, addr string, ca *testenv.TestCA) (string, error) {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

func serialOf(t *testing.T, certPEM []byte) string {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber.String()
}

// TestServeTLS: with --tls-cert-file and --tls-key-file the service serves
// its API over HTTPS only, with a certificate a client that trusts the
// issuing CA verifies (host name included); the whole API works over it,
// and the expiry of the certificate is a metric (on the metrics listener,
// which stays plain HTTP).
func TestServeTLS(t *testing.T) {
	tn := newTenant(t)
	ca := testenv.NewTestCA(t)
	notAfter := time.Now().Add(12 * time.Hour).Truncate(time.Second)
	certPEM, keyPEM := ca.ServerCert(t, notAfter, "bot.team-a.svc", "127.0.0.1")
	dir := newTLSDir(t, certPEM, keyPEM)
	srv := tn.serve(t, serverSetup{args: dir.args()})
	srv.useTLS(ca)

	srv.do(t, req{method: "GET", path: "/healthz", noAuth: true}).want(t, 200)
	srv.do(t, req{method: "POST", path: memPath("tina", "memories"), body: map[string]any{"content": "Tina prefers tea", "category": "preference"}}).want(t, 201)
	var list struct {
		Items []struct{ Content string } `json:"items"`
	}
	srv.do(t, req{method: "GET", path: memPath("tina", "memories")}).want(t, 200).decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].Content != "Tina prefers tea" {
		t.Fatalf("memories over TLS = %+v", list.Items)
	}

	// A client that does not trust the CA refuses the certificate.
	plain := &http.Client{Timeout: 10 * time.Second}
	resp, err := plain.Get(srv.base + "/healthz")
	if err == nil {
		resp.Body.Close()
	}
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("a client without the CA: %v, want an unknown authority error", err)
	}
	// Plain HTTP is not served on the TLS port.
	resp, err = plain.Get("http://" + srv.proc.Addr().String() + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP on the TLS port answered %d, want 400", resp.StatusCode)
		}
	}

	// The metrics listener stays plain HTTP (reached from the monitoring
	// namespaces only) and says when the served certificate expires.
	want := "engram_tls_certificate_expiry_timestamp_seconds " + formatFloat(float64(notAfter.Unix()))
	if !strings.Contains(srv.scrape(t), want) {
		t.Errorf("/metrics has no %q", want)
	}
}

// formatFloat prints a float the way the Prometheus text format does.
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// TestTLSCertificateReload: a renewed Secret (new certificate and key,
// swapped in at once as the kubelet does) is served without a restart;
// a pair that cannot be used is logged and the previous one kept.
func TestTLSCertificateReload(t *testing.T) {
	tn := newTenant(t)
	ca := testenv.NewTestCA(t)
	first, firstKey := ca.ServerCert(t, time.Now().Add(time.Hour), "127.0.0.1")
	dir := newTLSDir(t, first, firstKey)
	srv := tn.serve(t, serverSetup{args: dir.args()})
	srv.useTLS(ca)
	addr := srv.proc.Addr().String()
	waitSerial := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := servedSerial(t, addr, ca)
			if err == nil && got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: serial %s (%v), want %s", what, got, err, want)
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
	waitSerial("the first certificate", serialOf(t, first))

	renewed, renewedKey := ca.ServerCert(t, time.Now().Add(2*time.Hour), "127.0.0.1")
	dir.write(renewed, renewedKey)
	waitSerial("the renewed certificate", serialOf(t, renewed))
	srv.do(t, req{method: "GET", path: "/readyz", noAuth: true}).want(t, 200)

	// A key that does not belong to the certificate: logged, not served.
	_, otherKey := ca.ServerCert(t, time.Now().Add(time.Hour), "127.0.0.1")
	dir.write(renewed, otherKey)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(srv.logs.String(), "cannot reload the TLS certificate") {
		if time.Now().After(deadline) {
			t.Fatal("a mismatched key was not logged within 10 s")
		}
		time.Sleep(25 * time.Millisecond)
	}
	waitSerial("the renewed certificate after a bad pair", serialOf(t, renewed))
	srv.do(t, req{method: "GET", path: "/readyz", noAuth: true}).want(t, 200)
	if strings.Contains(srv.logs.String(), "PRIVATE KEY") {
		t.Error("the private key was logged")
	}
}

// TestServeTLSRefusesBadFlags: one TLS flag without the other is a usage
// error; a pair that cannot be used stops the start with the reason.
func TestServeTLSRefusesBadFlags(t *testing.T) {
	cfgPath := writeConfig(t, testConfig("engram_tls"))
	env := func(k string) string {
		if k == naming.EnvDatabaseURL {
			return closedPortURL(t)
		}
		return ""
	}
	var stderr strings.Builder
	code := Main(context.Background(), []string{"--config=" + cfgPath, "--tokens-file=/nonexistent", "--listen=127.0.0.1:0", "--tls-cert-file=/x/tls.crt"}, env, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--tls-cert-file and --tls-key-file go together") {
		t.Errorf("only --tls-cert-file: exit %d, stderr %s", code, stderr.String())
	}

	ca := testenv.NewTestCA(t)
	certPEM, _ := ca.ServerCert(t, time.Now().Add(time.Hour), "127.0.0.1")
	_, otherKey := ca.ServerCert(t, time.Now().Add(time.Hour), "127.0.0.1")
	dir := newTLSDir(t, certPEM, otherKey)
	stderr.Reset()
	args := append([]string{"--config=" + cfgPath, "--tokens-file=/nonexistent", "--listen=127.0.0.1:0"}, dir.args()...)
	code = Main(context.Background(), args, env, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "not a usable pair") || !strings.Contains(stderr.String(), "private key does not match public key") {
		t.Errorf("a mismatched key: exit %d, stderr %s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "PRIVATE KEY") {
		t.Error("the private key was printed")
	}
}
