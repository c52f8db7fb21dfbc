package auth

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
)

// MinKeyBytes is the shortest signing key accepted: HMAC-SHA256's block of
// security, 32 random bytes.
const MinKeyBytes = 32

// NewSigningKey returns the content of a new signing-key file: 32 random
// bytes, base64.
func NewSigningKey() (string, error) {
	b := make([]byte, MinKeyBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a signing key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// SigningKeys are the keys signed tokens are verified with. The first one
// mints; the others only verify, so a key can be rotated: add the new one
// first, move the minting backends, then remove the old one.
type SigningKeys struct {
	keys [][]byte
}

// ParseSigningKeys reads a signing-key file: one key a line, base64 or
// base64url, padded or not, of at least MinKeyBytes bytes; blank lines and
// # comments are ignored. Bad lines are skipped and reported (never their content).
func ParseSigningKeys(raw []byte) (*SigningKeys, []Skipped) {
	k := &SigningKeys{}
	var skipped []Skipped
	for i, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := decodeKey(line)
		if err != nil {
			skipped = append(skipped, Skipped{Line: i + 1, Reason: err.Error()})
			continue
		}
		k.keys = append(k.keys, key)
	}
	return k, skipped
}

func decodeKey(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		b, err = base64.RawURLEncoding.DecodeString(s)
	}
	if err != nil {
		return nil, fmt.Errorf("the key is not base64")
	}
	if len(b) < MinKeyBytes {
		return nil, fmt.Errorf("the key is %d bytes, fewer than the %d random bytes required", len(b), MinKeyBytes)
	}
	return b, nil
}

// Len is the number of keys.
func (k *SigningKeys) Len() int {
	if k == nil {
		return 0
	}
	return len(k.keys)
}

// MintKey is the key new tokens are signed with (the first), or nil.
func (k *SigningKeys) MintKey() []byte {
	if k.Len() == 0 {
		return nil
	}
	return k.keys[0]
}
