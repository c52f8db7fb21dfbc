package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestValidateTLSSecret: what cert-manager writes passes; each way a
// Secret can fail the service is refused with a message that says which.
func TestValidateTLSSecret(t *testing.T) {
	ca := testenv.NewTestCA(t)
	now := time.Now()
	crt, key := ca.ServerCert(t, now.Add(time.Hour), "bot.team-a.svc")
	_, otherKey := ca.ServerCert(t, now.Add(time.Hour), "bot.team-a.svc")
	expired, expiredKey := ca.ServerCert(t, now.Add(-time.Minute), "bot.team-a.svc")
	secret := func(data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{Type: corev1.SecretTypeTLS, Data: data}
	}
	if err := ValidateTLSSecret(secret(map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.PEM}), now); err != nil {
		t.Errorf("a cert-manager Secret: %v", err)
	}
	chain := append(append([]byte{}, crt...), ca.PEM...)
	if err := ValidateTLSSecret(secret(map[string][]byte{"tls.crt": chain, "tls.key": key}), now); err != nil {
		t.Errorf("a certificate with its chain: %v", err)
	}
	for what, c := range map[string]struct {
		data map[string][]byte
		want string
	}{
		"empty":        {map[string][]byte{}, "has no tls.crt and no tls.key"},
		"no key":       {map[string][]byte{"tls.crt": crt}, "has no tls.key"},
		"no cert":      {map[string][]byte{"tls.key": key}, "has no tls.crt"},
		"not PEM":      {map[string][]byte{"tls.crt": []byte("hello"), "tls.key": key}, "failed to find any PEM data in certificate input"},
		"another key":  {map[string][]byte{"tls.crt": crt, "tls.key": otherKey}, "private key does not match public key"},
		"key for cert": {map[string][]byte{"tls.crt": key, "tls.key": crt}, "not a usable certificate and key"},
		"expired":      {map[string][]byte{"tls.crt": expired, "tls.key": expiredKey}, "its certificate expired at"},
	} {
		err := ValidateTLSSecret(secret(c.data), now)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", what, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: the error shows key material: %v", what, err)
		}
	}
}
