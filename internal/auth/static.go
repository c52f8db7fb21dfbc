package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// MinTokenLength is the shortest static token accepted: 32 random bytes in
// unpadded base64url. Shorter tokens can be guessed or were typed by hand.
const MinTokenLength = 43

// tokenPrefix marks generated tokens, so secret scanners can find leaked ones.
const tokenPrefix = "engram_"

// NewToken returns a new static token: 32 bytes from crypto/rand, base64url.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a token: %w", err)
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// TokenLine formats one line of the tokens file.
func TokenLine(token string, role Role, owner, name string) string {
	parts := []string{token, "role=" + string(role)}
	if owner != "" {
		parts = append(parts, "owner="+owner)
	}
	if name != "" {
		parts = append(parts, "name="+name)
	}
	return strings.Join(parts, " ")
}

// StaticTokens is a parsed tokens file. It keeps the SHA-256 of each token,
// never the token: comparing digests makes every comparison the same
// length, so timing reveals neither a token nor its size.
type StaticTokens struct {
	entries []staticEntry
}

type staticEntry struct {
	digest [32]byte
	cred   Credential
}

// Skipped is a line of a tokens or keys file that was not loaded, and why.
// Reason never holds the token.
type Skipped struct {
	Line   int
	Reason string
}

// ParseTokens reads a tokens file: one token a line,
//
//	TOKEN [role=admin|app|agent] [owner=OWNER_ID] [name=NAME]
//
// Blank lines and lines starting with # are ignored. A line without role=
// is role app: the tokens of Secrets written before roles existed keep
// working as they did. Lines that are wrong (short token, unknown or
// repeated attribute, bad value, the same token twice) are skipped whole and
// reported: a typo must never widen what a token may do.
func ParseTokens(raw []byte) (*StaticTokens, []Skipped) {
	set := &StaticTokens{}
	var skipped []Skipped
	seen := map[[32]byte]int{}
	for _, l := range tokenLines(raw) {
		e, err := parseTokenLine(l.text)
		if err == nil {
			if first, dup := seen[e.digest]; dup {
				err = fmt.Errorf("the same token is on line %d already", first)
			}
		}
		if err != nil {
			skipped = append(skipped, Skipped{Line: l.number, Reason: err.Error()})
			continue
		}
		seen[e.digest] = l.number
		set.entries = append(set.entries, e)
	}
	return set, skipped
}

// FirstToken is the token of the first valid line of a tokens file (the
// operator writes the admin token there first), or "" when no line is
// valid. The demo and the tests use it to call a runtime's service.
func FirstToken(raw []byte) string {
	for _, l := range tokenLines(raw) {
		if _, err := parseTokenLine(l.text); err == nil {
			return strings.Fields(l.text)[0]
		}
	}
	return ""
}

type tokenLine struct {
	number int // 1-based
	text   string
}

// tokenLines are the lines of a tokens file that hold a token: trimmed,
// without blank lines and # comments.
func tokenLines(raw []byte) []tokenLine {
	var out []tokenLine
	for i, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, tokenLine{number: i + 1, text: line})
	}
	return out
}

func parseTokenLine(line string) (staticEntry, error) {
	fields := strings.Fields(line)
	token := fields[0]
	if len(token) < MinTokenLength {
		return staticEntry{}, fmt.Errorf("the token is %d characters, shorter than the %d of 32 random bytes in base64url", len(token), MinTokenLength)
	}
	if strings.HasPrefix(token, SignedPrefix) {
		return staticEntry{}, fmt.Errorf("the token starts with %q, the prefix of signed tokens, which are never listed", SignedPrefix)
	}
	e := staticEntry{digest: sha256.Sum256([]byte(token)), cred: Credential{Role: RoleApp}}
	set := map[string]bool{}
	// Errors name an attribute by its position, never by its text: a token
	// pasted with a space in it would otherwise reach the log.
	for i, f := range fields[1:] {
		key, value, ok := strings.Cut(f, "=")
		if !ok || value == "" {
			return staticEntry{}, fmt.Errorf("word %d after the token is not role=, owner= or name= with a value", i+1)
		}
		if set[key] {
			return staticEntry{}, fmt.Errorf("%s= is given twice", key)
		}
		if err := e.setAttribute(key, value); err != nil {
			return staticEntry{}, fmt.Errorf("word %d after the token: %w", i+1, err)
		}
		set[key] = true
	}
	if e.cred.ID == "" {
		e.cred.ID = "token:" + hex.EncodeToString(e.digest[:4])
	}
	return e, nil
}

func (e *staticEntry) setAttribute(key, value string) error {
	switch key {
	case "role":
		r, err := ParseRole(value)
		if err != nil {
			return errors.New("role= must be admin, app or agent")
		}
		e.cred.Role = r
	case "owner":
		if err := checkOwner(value); err != nil {
			return fmt.Errorf("owner= %w", err)
		}
		e.cred.Owner = value
	case "name":
		if err := checkIdentity(value); err != nil {
			return fmt.Errorf("name= %w", err)
		}
		e.cred.ID = value
	default:
		return errors.New("unknown attribute (role=, owner= and name= are known)")
	}
	return nil
}

// Len is the number of tokens loaded.
func (s *StaticTokens) Len() int {
	if s == nil {
		return 0
	}
	return len(s.entries)
}

// Lookup returns the credential of token. It compares with every token,
// without stopping at a match, in constant time.
func (s *StaticTokens) Lookup(token string) (Credential, bool) {
	if s == nil || token == "" {
		return Credential{}, false
	}
	d := sha256.Sum256([]byte(token))
	found := -1
	for i, e := range s.entries {
		eq := subtle.ConstantTimeCompare(d[:], e.digest[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return Credential{}, false
	}
	return s.entries[found].cred, true
}
