package controller

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// Credentials are what the <runtime>-db Secret holds.
type Credentials struct {
	URI, Host, Port, DBName, User, Password, Schema string
}

// LoginCredentials derives the tenant login role's credentials from the
// admin connection URL: same host, port, database and options.
func LoginCredentials(adminURL, schema, password string) (Credentials, error) {
	user := tenant.LoginRole(schema)
	uri, err := tenant.LoginURL(adminURL, user, password)
	if err != nil {
		return Credentials{}, err
	}
	u, err := url.Parse(uri)
	if err != nil {
		return Credentials{}, fmt.Errorf("parsing the login URL: %w", err)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	if host == "" {
		return Credentials{}, fmt.Errorf("the admin connection URL has no host")
	}
	return Credentials{
		URI: uri, Host: host, Port: port, DBName: strings.TrimPrefix(u.Path, "/"),
		User: user, Password: password, Schema: schema,
	}, nil
}

// CredentialsSecret is the <runtime>-db Secret. Its annotation records the
// SHA-256 of the password so a hand-edited password is noticed (and fixed
// by a rotation: the old one cannot be recovered).
func CredentialsSecret(rt *memoryv1alpha1.MemoryRuntime, c Credentials) *corev1.Secret {
	meta := ownedMeta(rt, CredentialsSecretName(rt.Name), ComponentCredentials)
	meta.Annotations = map[string]string{AnnotationPasswordHash: PasswordDigest(c.Password)}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: meta,
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			KeyURI:      []byte(c.URI),
			KeyHost:     []byte(c.Host),
			KeyPort:     []byte(c.Port),
			KeyDBName:   []byte(c.DBName),
			KeyUser:     []byte(c.User),
			KeyPassword: []byte(c.Password),
			KeySchema:   []byte(c.Schema),
		},
	}
}

// PasswordDigest is the hex SHA-256 of a password.
func PasswordDigest(password string) string { return sha256Hex([]byte(password)) }

// StoredPassword returns the password of a live <runtime>-db Secret when it
// is the one the operator wrote (its digest matches the annotation).
func StoredPassword(s *corev1.Secret) (string, bool) {
	if s == nil {
		return "", false
	}
	pw := string(s.Data[KeyPassword])
	if pw == "" || s.Annotations[AnnotationPasswordHash] != PasswordDigest(pw) {
		return "", false
	}
	return pw, true
}

// APITokenSecret is the <runtime>-api-token Secret. tokens is what it holds
// now when that is non-empty (users add and remove lines to rotate tokens;
// the operator never touches them), else one new random token.
func APITokenSecret(rt *memoryv1alpha1.MemoryRuntime, tokens string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: ownedMeta(rt, APITokenSecretName(rt.Name), ComponentCredentials),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{KeyTokens: []byte(tokens)},
	}
}

// HasToken reports whether a tokens file holds at least one token (blank
// lines and # comments do not count).
func HasToken(tokens string) bool {
	for line := range strings.SplitSeq(tokens, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return true
		}
	}
	return false
}

// NewToken returns a random bearer token: 32 bytes from crypto/rand, URL-safe.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating an API token: %w", err)
	}
	return "engram_" + base64.RawURLEncoding.EncodeToString(b), nil
}
