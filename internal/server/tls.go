package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// certificate serves the TLS certificate and key of --tls-cert-file and
// --tls-key-file, and reloads them when they change. The operator mounts a
// kubernetes.io/tls Secret there; when cert-manager renews it, the kubelet
// swaps both files at once (a symlink swap), so polling their content
// works for every volume type, as for the tokens file. A pair that cannot
// be used (half-written, a key that does not match) is logged and the
// previous one kept: a renewal never turns a serving service into one
// that fails every handshake.
type certificate struct {
	certPath, keyPath string
	logger            *slog.Logger
	expiry            prometheus.Gauge

	current atomic.Pointer[tls.Certificate]
	// Content of the pair in use, and the last error logged, so a change
	// or a failure is logged once, not on every poll.
	certPEM, keyPEM []byte
	lastErr         string
}

// loadCertificate reads the pair once. Unlike a later reload, a pair that
// cannot be used is an error: the service does not start without one.
func loadCertificate(certPath, keyPath string, logger *slog.Logger, m *Metrics) (*certificate, error) {
	c := &certificate{certPath: certPath, keyPath: keyPath, logger: logger}
	if m != nil {
		c.expiry = m.tlsExpiry
	}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// tlsConfig is the server's TLS configuration: TLS 1.2 or newer (Go's
// default cipher suites), the certificate read at each handshake.
func (c *certificate) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.current.Load(), nil
		},
	}
}

// Watch reloads the pair every interval until ctx is done.
func (c *certificate) Watch(ctx context.Context, interval time.Duration) {
	every(ctx, interval, func() {
		if err := c.reload(); err != nil {
			if msg := err.Error(); msg != c.lastErr {
				c.lastErr = msg
				c.logger.Error("cannot reload the TLS certificate: still serving the previous one", "error", msg)
			}
		}
	})
}

// reload reads both files and, when their content changed, parses and
// swaps in the new pair.
func (c *certificate) reload() error {
	certPEM, err := os.ReadFile(c.certPath)
	if err != nil {
		return fmt.Errorf("reading --tls-cert-file: %w", err)
	}
	keyPEM, err := os.ReadFile(c.keyPath)
	if err != nil {
		return fmt.Errorf("reading --tls-key-file: %w", err)
	}
	if c.current.Load() != nil && bytes.Equal(certPEM, c.certPEM) && bytes.Equal(keyPEM, c.keyPEM) {
		return nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("the certificate of %s and the key of %s are not a usable pair: %w", c.certPath, c.keyPath, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("parsing the certificate of %s: %w", c.certPath, err)
	}
	pair.Leaf = leaf
	c.current.Store(&pair)
	c.certPEM, c.keyPEM, c.lastErr = certPEM, keyPEM, ""
	if c.expiry != nil {
		c.expiry.Set(float64(leaf.NotAfter.Unix()))
	}
	c.logger.Info("loaded the TLS certificate", "path", c.certPath, "subject", leaf.Subject.String(),
		"dnsNames", strings.Join(leaf.DNSNames, ","), "notAfter", leaf.NotAfter.UTC().Format(time.RFC3339))
	return nil
}
