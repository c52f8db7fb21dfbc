package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Signed tokens are minted by an application backend that holds the
// runtime's signing key, so it can hand each end user's agent a short-lived
// token bound to that user without asking Kubernetes:
//
//	egm1.<base64url(JSON claims)>.<base64url(HMAC-SHA256(key, "egm1." + claims part))>
//
// The MAC covers the version prefix, so a token cannot be replayed under
// another format. Claims are decoded strictly: an unknown claim is refused,
// never ignored.

// SignedPrefix starts every signed token (format version 1).
const SignedPrefix = "egm1."

// MaxSignedTTL caps the lifetime (exp - iat) of a signed token: a leaked
// one stops working within a day, and no revocation list is needed.
const MaxSignedTTL = 24 * time.Hour

// clockSkew is how far in the future iat may be (clocks of the backend and
// the service differ a little).
const clockSkew = time.Minute

// Claims are the content of a signed token.
type Claims struct {
	// Role is agent or app; admin is never delegated to a signed token.
	Role Role `json:"role"`
	// Owner binds the token to one owner; empty means any owner.
	Owner string `json:"owner,omitempty"`
	// Subject is the identity history records (e.g. "support-bot/alice").
	Subject string `json:"sub"`
	// ExpiresAt and IssuedAt are Unix seconds.
	ExpiresAt int64 `json:"exp"`
	IssuedAt  int64 `json:"iat"`
}

// Errors of Verify, to tell a client why its signed token was refused.
var (
	ErrMalformed    = errors.New("the signed token is malformed")
	ErrBadSignature = errors.New("the signed token's signature does not verify (another key, or the token was altered)")
	ErrExpired      = errors.New("the signed token has expired")
	ErrNoKey        = errors.New("this service has no signing key, so it accepts no signed token")
)

// check validates claims on their own (no clock): what Mint refuses to
// sign and Verify refuses to accept.
func (c *Claims) check() error {
	if c.Role != RoleAgent && c.Role != RoleApp {
		return fmt.Errorf("role %q: a signed token is role agent or app", c.Role)
	}
	if c.Owner != "" {
		if err := checkOwner(c.Owner); err != nil {
			return fmt.Errorf("owner %w", err)
		}
	}
	if err := checkIdentity(c.Subject); err != nil {
		return fmt.Errorf("subject %w", err)
	}
	if c.IssuedAt <= 0 || c.ExpiresAt <= c.IssuedAt {
		return errors.New("exp must come after iat")
	}
	// In seconds: a Duration of a forged exp could overflow and wrap.
	if c.ExpiresAt-c.IssuedAt > int64(MaxSignedTTL/time.Second) {
		return fmt.Errorf("the lifetime exp - iat is more than %s", MaxSignedTTL)
	}
	return nil
}

// Mint signs claims with key.
func Mint(key []byte, c Claims) (string, error) {
	if len(key) < MinKeyBytes {
		return "", fmt.Errorf("the signing key is %d bytes, fewer than %d", len(key), MinKeyBytes)
	}
	if err := c.check(); err != nil {
		return "", fmt.Errorf("cannot mint: %w", err)
	}
	js, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encoding the claims: %w", err)
	}
	signed := SignedPrefix + base64.RawURLEncoding.EncodeToString(js)
	return signed + "." + base64.RawURLEncoding.EncodeToString(mac(key, signed)), nil
}

// MintAgent mints an agent token for owner (empty: any owner) valid for ttl from now.
func MintAgent(key []byte, owner, subject string, ttl time.Duration, now time.Time) (string, error) {
	return Mint(key, Claims{Role: RoleAgent, Owner: owner, Subject: subject,
		IssuedAt: now.Unix(), ExpiresAt: now.Add(ttl).Unix()})
}

// strictB64 decodes the parts of a signed token. Strict: the unused low
// bits of the last character must be zero, otherwise several spellings of
// one signature would verify (a token must have exactly one spelling).
var strictB64 = base64.RawURLEncoding.Strict()

func mac(key []byte, signed string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(signed))
	return h.Sum(nil)
}

// IsSigned reports whether token has the form of a signed token.
func IsSigned(token string) bool { return strings.HasPrefix(token, SignedPrefix) }

// Verify checks a signed token against keys (any may have signed it, for
// rotation) and returns its credential. The signature is checked before
// anything in the claims is trusted.
func (k *SigningKeys) Verify(token string, now time.Time) (Credential, error) {
	if k.Len() == 0 {
		return Credential{}, ErrNoKey
	}
	rest, ok := strings.CutPrefix(token, SignedPrefix)
	payload, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return Credential{}, ErrMalformed
	}
	got, err := strictB64.DecodeString(sig)
	if err != nil {
		return Credential{}, ErrMalformed
	}
	verified := 0
	for _, key := range k.keys {
		if hmac.Equal(got, mac(key, SignedPrefix+payload)) {
			verified = 1
		}
	}
	if verified == 0 {
		return Credential{}, ErrBadSignature
	}
	c, err := decodeClaims(payload)
	if err != nil {
		return Credential{}, err
	}
	if c.IssuedAt > now.Add(clockSkew).Unix() {
		return Credential{}, fmt.Errorf("%w: it was issued in the future (iat)", ErrMalformed)
	}
	if now.Unix() >= c.ExpiresAt {
		return Credential{}, ErrExpired
	}
	return Credential{Role: c.Role, Owner: c.Owner, ID: c.Subject, Expires: time.Unix(c.ExpiresAt, 0).UTC()}, nil
}

func decodeClaims(payload string) (Claims, error) {
	js, err := strictB64.DecodeString(payload)
	if err != nil {
		return Claims{}, ErrMalformed
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var c Claims
	if err := dec.Decode(&c); err != nil || dec.More() {
		return Claims{}, fmt.Errorf("%w: the claims are not the expected JSON", ErrMalformed)
	}
	if err := c.check(); err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return c, nil
}
