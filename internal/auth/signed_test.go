package auth

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func testKeys(t *testing.T, n int) (*SigningKeys, []string) {
	t.Helper()
	var lines []string
	for range n {
		k, err := NewSigningKey()
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, k)
	}
	keys, skipped := ParseSigningKeys([]byte(strings.Join(lines, "\n")))
	if len(skipped) != 0 || keys.Len() != n {
		t.Fatalf("ParseSigningKeys: %d keys, skipped %+v", keys.Len(), skipped)
	}
	return keys, lines
}

func TestSignedTokenRoundTrip(t *testing.T) {
	keys, _ := testKeys(t, 1)
	now := time.Unix(1_800_000_000, 0)
	token, err := MintAgent(keys.MintKey(), "alice", "support-bot/alice", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if !IsSigned(token) || strings.Count(token, ".") != 2 {
		t.Fatalf("token %q is not egm1.<claims>.<mac>", token)
	}
	c, err := keys.Verify(token, now.Add(59*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := Credential{Role: RoleAgent, Owner: "alice", ID: "support-bot/alice", Expires: now.Add(time.Hour).UTC()}
	if c != want {
		t.Fatalf("Verify = %+v, want %+v", c, want)
	}
}

func TestSignedTokenRefusals(t *testing.T) {
	keys, _ := testKeys(t, 1)
	other, _ := testKeys(t, 1)
	now := time.Unix(1_800_000_000, 0)
	good, err := MintAgent(keys.MintKey(), "alice", "bot", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, ".")
	claims := func(js string) string { return base64.RawURLEncoding.EncodeToString([]byte(js)) }
	// A token signed with the right key around claims that break a rule.
	signed := func(js string) string {
		p := SignedPrefix + claims(js)
		return p + "." + base64.RawURLEncoding.EncodeToString(mac(keys.MintKey(), p))
	}
	iat, exp := now.Unix(), now.Add(time.Hour).Unix()
	for _, tc := range []struct {
		name  string
		token string
		want  error
		at    time.Time
	}{
		{"expired", good, ErrExpired, now.Add(time.Hour)},
		{"another key", mustMint(t, other.MintKey(), now), ErrBadSignature, now},
		{"claims altered", parts[0] + "." + claims(`{"role":"agent","owner":"bob","sub":"bot","exp":`+itoa(exp)+`,"iat":`+itoa(iat)+`}`) + "." + parts[2], ErrBadSignature, now},
		{"mac cut", good[:len(good)-3], ErrBadSignature, now},
		{"no mac", parts[0] + "." + parts[1], ErrMalformed, now},
		{"mac not base64", good + "!", ErrMalformed, now},
		{"admin role", signed(`{"role":"admin","sub":"x","exp":` + itoa(exp) + `,"iat":` + itoa(iat) + `}`), ErrMalformed, now},
		{"no exp", signed(`{"role":"agent","sub":"x","iat":` + itoa(iat) + `}`), ErrMalformed, now},
		{"lifetime over 24h", signed(`{"role":"agent","sub":"x","exp":` + itoa(iat+25*3600) + `,"iat":` + itoa(iat) + `}`), ErrMalformed, now},
		{"overflowing exp", signed(`{"role":"agent","sub":"x","exp":9223372036854775807,"iat":1}`), ErrMalformed, now},
		{"issued in the future", signed(`{"role":"agent","sub":"x","exp":` + itoa(iat+7200) + `,"iat":` + itoa(iat+3600) + `}`), ErrMalformed, now},
		{"unknown claim", signed(`{"role":"agent","sub":"x","exp":` + itoa(exp) + `,"iat":` + itoa(iat) + `,"scope":"all"}`), ErrMalformed, now},
		{"no subject", signed(`{"role":"agent","exp":` + itoa(exp) + `,"iat":` + itoa(iat) + `}`), ErrMalformed, now},
		{"bad owner", signed(`{"role":"agent","owner":"a b","sub":"x","exp":` + itoa(exp) + `,"iat":` + itoa(iat) + `}`), ErrMalformed, now},
		{"not JSON", signed(`role=agent`), ErrMalformed, now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := keys.Verify(tc.token, tc.at)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %+v, %v; want %v", c, err, tc.want)
			}
		})
	}
	if _, err := (&SigningKeys{}).Verify(good, now); !errors.Is(err, ErrNoKey) {
		t.Fatalf("without keys: %v, want ErrNoKey", err)
	}
}

func mustMint(t *testing.T, key []byte, now time.Time) string {
	t.Helper()
	tok, err := MintAgent(key, "alice", "bot", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestMintRefuses(t *testing.T) {
	keys, _ := testKeys(t, 1)
	now := time.Now()
	for name, c := range map[string]Claims{
		"admin":        {Role: RoleAdmin, Subject: "x", IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()},
		"over 24h":     {Role: RoleAgent, Subject: "x", IssuedAt: now.Unix(), ExpiresAt: now.Add(25 * time.Hour).Unix()},
		"no lifetime":  {Role: RoleAgent, Subject: "x", IssuedAt: now.Unix(), ExpiresAt: now.Unix()},
		"no subject":   {Role: RoleAgent, IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()},
		"bad owner id": {Role: RoleAgent, Owner: "../x", Subject: "x", IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Hour).Unix()},
	} {
		if tok, err := Mint(keys.MintKey(), c); err == nil {
			t.Errorf("%s: minted %q", name, tok)
		}
	}
	if _, err := MintAgent([]byte("short key"), "a", "x", time.Hour, now); err == nil {
		t.Error("minted with a 9-byte key")
	}
}

// TestKeyRotation: every key of the file verifies, the first one mints.
func TestKeyRotation(t *testing.T) {
	keys, lines := testKeys(t, 2)
	now := time.Now()
	oldOnly, _ := ParseSigningKeys([]byte(lines[1]))
	tok := mustMint(t, oldOnly.MintKey(), now)
	if _, err := keys.Verify(tok, now); err != nil {
		t.Fatalf("a token of the second key: %v", err)
	}
	if string(keys.MintKey()) == string(oldOnly.MintKey()) {
		t.Fatal("the second key mints")
	}
}

func TestParseSigningKeys(t *testing.T) {
	k32 := strings.Repeat("k", 32)
	file := strings.Join([]string{
		"# signing keys",
		base64.StdEncoding.EncodeToString([]byte(k32)),    // padded base64
		base64.RawURLEncoding.EncodeToString([]byte(k32)), // base64url
		base64.StdEncoding.EncodeToString([]byte("too short")),
		"not base64 at all!",
	}, "\n")
	keys, skipped := ParseSigningKeys([]byte(file))
	if keys.Len() != 2 || len(skipped) != 2 || skipped[0].Line != 4 || !strings.Contains(skipped[0].Reason, "fewer than the 32") ||
		skipped[1].Line != 5 || !strings.Contains(skipped[1].Reason, "not base64") {
		t.Fatalf("keys %d, skipped %+v", keys.Len(), skipped)
	}
}
