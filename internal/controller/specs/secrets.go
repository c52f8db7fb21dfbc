package specs

import (
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/naming"
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
	meta := ownedMeta(rt, naming.CredentialsSecretName(rt.Name), naming.ComponentCredentials)
	meta.Annotations = map[string]string{naming.AnnotationPasswordHash: PasswordDigest(c.Password)}
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: meta,
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			naming.KeyURI:      []byte(c.URI),
			naming.KeyHost:     []byte(c.Host),
			naming.KeyPort:     []byte(c.Port),
			naming.KeyDBName:   []byte(c.DBName),
			naming.KeyUser:     []byte(c.User),
			naming.KeyPassword: []byte(c.Password),
			naming.KeySchema:   []byte(c.Schema),
		},
	}
}

// PasswordDigest is the hex SHA-256 of a password.
func PasswordDigest(password string) string { return naming.SHA256Hex([]byte(password)) }

// StoredPassword returns the password of a live <runtime>-db Secret when it
// is the one the operator wrote (its digest matches the annotation).
func StoredPassword(s *corev1.Secret) (string, bool) {
	if s == nil {
		return "", false
	}
	pw := string(s.Data[naming.KeyPassword])
	if pw == "" || s.Annotations[naming.AnnotationPasswordHash] != PasswordDigest(pw) {
		return "", false
	}
	return pw, true
}

// APITokenSecret is the <runtime>-api-token Secret with its two keys:
// tokens (static bearer tokens, one a line with role=, owner=, name=) and
// signing-key (verifies signed tokens). The service reads both from the
// mounted Secret and reloads them on change, without a restart.
func APITokenSecret(rt *memoryv1alpha1.MemoryRuntime, tokens, signingKey string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: ownedMeta(rt, naming.APITokenSecretName(rt.Name), naming.ComponentCredentials),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{naming.KeyTokens: []byte(tokens), naming.KeySigningKey: []byte(signingKey)},
	}
}

// APITokenContent is what the <runtime>-api-token Secret must hold, given
// what it holds now (live may be nil). Users own both keys: the operator
// only adds, and only what is missing:
//   - when tokens holds no valid token (none yet, or only short or broken
//     lines), a new admin token line is appended below the existing lines;
//   - when signing-key is missing or blank, a new key is written.
//
// Anything else is kept byte for byte, so an idle runtime causes no write.
func APITokenContent(live map[string][]byte) (tokens, signingKey string, err error) {
	tokens, signingKey = string(live[naming.KeyTokens]), string(live[naming.KeySigningKey])
	if !HasValidToken(tokens) {
		tok, err := auth.NewToken()
		if err != nil {
			return "", "", err
		}
		if tokens != "" && !strings.HasSuffix(tokens, "\n") {
			tokens += "\n"
		}
		tokens += auth.TokenLine(tok, auth.RoleAdmin, "", "admin") + "\n"
	}
	if strings.TrimSpace(signingKey) == "" {
		key, err := auth.NewSigningKey()
		if err != nil {
			return "", "", err
		}
		signingKey = key + "\n"
	}
	return tokens, signingKey, nil
}

// HasValidToken reports whether a tokens file holds at least one token the
// service loads (the service's own parser decides).
func HasValidToken(tokens string) bool {
	set, _ := auth.ParseTokens([]byte(tokens))
	return set.Len() > 0
}
