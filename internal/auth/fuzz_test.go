package auth

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"
	"unicode"
)

// The seed corpora are in testdata/fuzz/<FuzzName>/; plain go test runs
// them, make fuzz explores from them.

// lineRole is what a tokens-file line says about its token, read the
// simplest way: the role= and owner= words (role app when none).
func lineRole(fields []string) (Role, string) {
	role, owner := RoleApp, ""
	for _, f := range fields[1:] {
		if v, ok := strings.CutPrefix(f, "role="); ok {
			role = Role(v)
		}
		if v, ok := strings.CutPrefix(f, "owner="); ok {
			owner = v
		}
	}
	return role, owner
}

// FuzzParseTokens: a tokens file never yields a credential wider than its
// line says. Every token that loads has exactly the role and owner binding
// written on its (first) line; a skipped line gives its token nothing; the
// reason of a skipped line never quotes the line.
func FuzzParseTokens(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		set, skipped := ParseTokens(raw)
		skippedLine := map[int]string{}
		for _, s := range skipped {
			skippedLine[s.Line] = s.Reason
		}
		lines := strings.Split(string(raw), "\n")
		// The tokens of lines that loaded: a skipped line's token may be
		// loaded by another line (which then says what it may do).
		loadedBy := map[string]bool{}
		for i, line := range lines {
			if fields := strings.Fields(line); len(fields) > 0 && skippedLine[i+1] == "" {
				loadedBy[fields[0]] = true
			}
		}
		loaded := map[string]bool{}
		for i, line := range lines {
			fields := strings.Fields(line)
			if len(fields) == 0 || strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			token := fields[0]
			if reason, bad := skippedLine[i+1]; bad {
				for _, w := range fields {
					if len(w) >= 12 && strings.Contains(reason, w) {
						t.Fatalf("line %d: reason %q quotes %q", i+1, reason, w)
					}
				}
				if c, ok := set.Lookup(token); ok && !loadedBy[token] {
					t.Fatalf("line %d was skipped (%s), yet its token has %+v", i+1, reason, c)
				}
				continue
			}
			c, ok := set.Lookup(token)
			if !ok {
				t.Fatalf("line %d was neither loaded nor reported", i+1)
			}
			role, owner := lineRole(fields)
			if c.Role != role || c.Owner != owner {
				t.Fatalf("line %d %q gives role %q owner %q", i+1, line, c.Role, c.Owner)
			}
			if len(token) < MinTokenLength || IsSigned(token) || !c.Role.Includes(RoleAgent) {
				t.Fatalf("line %d: token %q loaded as %+v", i+1, token, c)
			}
			if c.Owner != "" && checkOwner(c.Owner) != nil || checkIdentity(c.ID) != nil && !strings.HasPrefix(c.ID, "token:") {
				t.Fatalf("line %d: credential %+v has an invalid owner or name", i+1, c)
			}
			loaded[token] = true
		}
		if set.Len() != len(loaded) {
			t.Fatalf("%d tokens loaded, %d lines accounted for", set.Len(), len(loaded))
		}
	})
}

// FuzzTokenLine: what `manager token new` writes (TokenLine) is read back
// by ParseTokens as exactly that credential, whenever its parts are valid
// (the CLI checks them).
func FuzzTokenLine(f *testing.F) {
	f.Fuzz(func(t *testing.T, token, role, owner, name string) {
		line := TokenLine(token, Role(role), owner, name)
		set, skipped := ParseTokens([]byte(line))
		_, roleErr := ParseRole(role)
		valid := len(token) >= MinTokenLength && !strings.ContainsFunc(token, unicode.IsSpace) && !IsSigned(token) &&
			!strings.HasPrefix(token, "#") && roleErr == nil &&
			(owner == "" || checkOwner(owner) == nil) && (name == "" || checkIdentity(name) == nil)
		if !valid {
			// The CLI never passes such parts; still, words smuggled into
			// owner or name can never change the role written first.
			if c, ok := set.Lookup(token); ok {
				first := strings.TrimPrefix(strings.Fields("role=" + role)[0], "role=")
				if c.Role != Role(first) {
					t.Fatalf("parts (%q %q %q %q) loaded role %q", token, role, owner, name, c.Role)
				}
			}
			return
		}
		if len(skipped) != 0 || set.Len() != 1 {
			t.Fatalf("TokenLine(%q, %q, %q, %q) = %q: skipped %+v", token, role, owner, name, line, skipped)
		}
		c, ok := set.Lookup(token)
		if !ok || c.Role != Role(role) || c.Owner != owner || (name != "" && c.ID != name) {
			t.Fatalf("TokenLine(%q, %q, %q, %q) reads back as %+v", token, role, owner, name, c)
		}
	})
}

// fuzzKey is a fixed signing key: fuzzed tokens are verified against it.
var fuzzKey = bytes.Repeat([]byte{0x5a}, MinKeyBytes)

// fuzzNow is the fixed clock of the signed-token targets.
var fuzzNow = time.Unix(1_800_000_000, 0)

// FuzzVerify: no string verifies unless it is exactly a token the key
// minted: a token that verifies is canonical (re-encoding its parts gives
// it back, so no second spelling of one token exists), carries role agent
// or app (never admin), a valid owner and subject, and has not expired.
func FuzzVerify(f *testing.F) {
	keys := &SigningKeys{keys: [][]byte{fuzzKey}}
	f.Fuzz(func(t *testing.T, token string) {
		c, err := keys.Verify(token, fuzzNow)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if c.Role != RoleAgent && c.Role != RoleApp {
			t.Fatalf("%q verified with role %q", token, c.Role)
		}
		if (c.Owner != "" && checkOwner(c.Owner) != nil) || checkIdentity(c.ID) != nil {
			t.Fatalf("%q verified as %+v", token, c)
		}
		if !c.Expires.After(fuzzNow) || c.Expires.Sub(fuzzNow) > MaxSignedTTL+clockSkew {
			t.Fatalf("%q verified, expires %v (now %v)", token, c.Expires, fuzzNow)
		}
		payload, sig, _ := strings.Cut(strings.TrimPrefix(token, SignedPrefix), ".")
		rawSig, _ := base64.RawURLEncoding.DecodeString(sig)
		if canon := SignedPrefix + payload + "." + base64.RawURLEncoding.EncodeToString(rawSig); canon != token {
			t.Fatalf("%q verified, but its canonical spelling is %q", token, canon)
		}
	})
}

// FuzzMintVerify: Mint refuses exactly the claims Verify would refuse, a
// minted token verifies to exactly its claims while it is valid, and any
// change of one character makes it fail.
func FuzzMintVerify(f *testing.F) {
	keys := &SigningKeys{keys: [][]byte{fuzzKey}}
	f.Fuzz(func(t *testing.T, role, owner, subject string, iat, ttl int64, flip uint16) {
		cl := Claims{Role: Role(role), Owner: owner, Subject: subject, IssuedAt: iat, ExpiresAt: iat + ttl}
		token, err := Mint(fuzzKey, cl)
		if err != nil {
			if cl.check() == nil {
				t.Fatalf("Mint refused valid claims %+v: %v", cl, err)
			}
			return
		}
		if cl.check() != nil {
			t.Fatalf("Mint signed invalid claims %+v", cl)
		}
		at := time.Unix(iat, 0)
		c, err := keys.Verify(token, at)
		if err != nil {
			t.Fatalf("Verify(Mint(%+v)) at iat: %v", cl, err)
		}
		want := Credential{Role: cl.Role, Owner: owner, ID: subject, Expires: time.Unix(cl.ExpiresAt, 0).UTC()}
		if c != want {
			t.Fatalf("Verify(Mint(%+v)) = %+v, want %+v", cl, c, want)
		}
		if _, err := keys.Verify(token, time.Unix(cl.ExpiresAt, 0)); err == nil {
			t.Fatalf("token of %+v still verifies at exp", cl)
		}
		// Change one character: to its neighbour in the base64url alphabet
		// (the smallest change of bits) or to a few others.
		i := len(SignedPrefix) + int(flip)%(len(token)-len(SignedPrefix))
		const b64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		next := b64url[(strings.IndexByte(b64url, token[i])+1)%len(b64url)]
		for _, b := range []byte{next, 'A', '_', '.', 'x', '0'} {
			if token[i] == b {
				continue
			}
			altered := token[:i] + string(b) + token[i+1:]
			if c, err := keys.Verify(altered, at); err == nil {
				t.Fatalf("altered token %q (byte %d) verifies as %+v", altered, i, c)
			}
		}
	})
}

// FuzzParseSigningKeys: every key loaded is at least MinKeyBytes long, bad
// lines are reported by number without their content, and a line never
// yields more than one key.
func FuzzParseSigningKeys(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		keys, skipped := ParseSigningKeys(raw)
		lines := strings.Split(string(raw), "\n")
		if keys.Len()+len(skipped) > len(lines) {
			t.Fatalf("%d keys and %d skipped from %d lines", keys.Len(), len(skipped), len(lines))
		}
		for _, k := range keys.keys {
			if len(k) < MinKeyBytes {
				t.Fatalf("loaded a key of %d bytes", len(k))
			}
		}
		for _, s := range skipped {
			if s.Line < 1 || s.Line > len(lines) {
				t.Fatalf("skipped line %d of %d", s.Line, len(lines))
			}
			if l := strings.TrimSpace(lines[s.Line-1]); len(l) >= 12 && strings.Contains(s.Reason, l) {
				t.Fatalf("reason %q quotes line %d", s.Reason, s.Line)
			}
		}
	})
}
