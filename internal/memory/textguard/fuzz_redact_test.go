package textguard

import (
	"encoding/base64"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzRedactor has every built-in pattern, as the default policy does.
func fuzzRedactor(t testing.TB) *Redactor {
	t.Helper()
	r, err := NewRedactor(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// anyMarker is a redaction marker of any kind.
var anyMarker = regexp.MustCompile(`\[REDACTED:[a-z_]+\]`)

// FuzzRedact: for any text, redaction never panics, keeps valid UTF-8
// valid, reports a kind exactly when it changed something, is idempotent
// (stored text is redacted again before it goes to a model), and leaves
// nothing any built-in pattern would still call a secret.
func FuzzRedact(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		r := fuzzRedactor(t)
		out, kinds := r.Redact(s)
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("redact(%q) = %q, not valid UTF-8", s, out)
		}
		if (out != s) != (len(kinds) > 0) {
			t.Fatalf("redact(%q) = %q with kinds %v", s, out, kinds)
		}
		if !slices.IsSorted(kinds) || len(slices.Compact(slices.Clone(kinds))) != len(kinds) {
			t.Fatalf("kinds %v not sorted and unique", kinds)
		}
		if again, _ := r.Redact(out); again != out {
			t.Fatalf("redacting twice changes the text:\nin     %q\nonce   %q\ntwice  %q", s, out, again)
		}
		if left := r.Leftover(out); left != "" {
			t.Fatalf("redact(%q) = %q still holds a secret (%s)", s, out, left)
		}
	})
}

// secretShapes build a secret of each built-in kind from fuzzed bytes:
// key is written before the secret and kept (a key name, a URL prefix),
// value is the secret proper, which must not survive; after follows it.
var secretShapes = []struct {
	kind       string
	key, after string
	alphabet   string
	min, max   int                   // length of the value (max 0: no bound)
	build      func(v string) string // optional: turns the value into the secret (basic auth)
}{
	{kind: "private_key", key: "-----BEGIN RSA PRIVATE KEY-----\n", after: "\n-----END RSA PRIVATE KEY-----", alphabet: b64Chars + "\n", min: 8},
	{kind: "aws_access_key", key: "AKIA", alphabet: upperDigits, min: 16, max: 16},
	{kind: "aws_secret_key", key: "aws_secret_access_key = ", alphabet: b64Chars, min: 40, max: 40},
	{kind: "github_token", key: "ghp_", alphabet: alnum, min: 36, max: 255},
	{kind: "gitlab_token", key: "glpat-", alphabet: alnum + "_-", min: 20},
	{kind: "anthropic_key", key: "sk-ant-", alphabet: alnum + "_-", min: 20},
	{kind: "openai_key", key: "sk-", alphabet: alnum + "_-", min: 20},
	{kind: "slack_token", key: "xoxb-", alphabet: alnum + "-", min: 10},
	{kind: "jwt", key: "eyJhbGciOi.eyJzdWIiOi.", alphabet: alnum + "_-", min: 8},
	{kind: "bearer_token", key: "Authorization: Bearer ", alphabet: alnum + "-._~+/", min: 8},
	{kind: "basic_auth", key: "Authorization: Basic ", alphabet: alnum, min: 6,
		build: func(v string) string {
			return base64.StdEncoding.EncodeToString([]byte(v[:len(v)/2] + ":" + v[len(v)/2:]))
		}},
	{kind: "url_password", key: "postgres://app:", after: "@db:5432/x", alphabet: alnum + "!$&()*+,;=~._-:[]", min: 8},
	{kind: "password", key: "password=", alphabet: alnum + "!#$%&()*+-./:<=>?@[]^_`{|}~", min: 8},
	{kind: "password", key: "my passphrase is ", alphabet: alnum + "!#$%&()*+-./:<=>?@[]^_`{|}~", min: 8},
}

const (
	upperDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	alnum       = upperDigits + "abcdefghijklmnopqrstuvwxyz"
	b64Chars    = alnum + "+/"
)

// shape maps fuzzed bytes onto the alphabet (bytes of the alphabet stand
// for themselves, so seeds are readable): min to max characters (the
// lengths of the real format; a longer run is not that kind of secret).
func shape(raw []byte, alphabet string, minLen, maxLen int) string {
	n := max(len(raw), minLen)
	if maxLen > 0 {
		n = min(n, maxLen)
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		c := byte(i*7 + 3)
		if i < len(raw) {
			c = raw[i]
		}
		if strings.IndexByte(alphabet, c) < 0 {
			c = alphabet[int(c)%len(alphabet)]
		}
		b.WriteByte(c)
	}
	return b.String()
}

// FuzzRedactSeeded puts a secret of a fuzzed kind and value between
// fuzzed text and checks that the value never reaches the output: not
// whole, and not any 8-character piece of it.
func FuzzRedactSeeded(f *testing.F) {
	f.Fuzz(func(t *testing.T, before string, kind uint8, raw []byte, after string) {
		r := fuzzRedactor(t)
		sh := secretShapes[int(kind)%len(secretShapes)]
		value := shape(raw, sh.alphabet, sh.min, sh.max)
		if sh.build != nil {
			value = sh.build(value)
		}
		in := before + " " + sh.key + value + sh.after + " " + after
		out, kinds := r.Redact(in)
		// What the output may hold besides the redacted secret: the text
		// around it (itself redacted or not) and the markers.
		context := anyMarker.ReplaceAllString(before+" "+sh.key+"\x00"+sh.after+" "+after, "\x00")
		plain := anyMarker.ReplaceAllString(out, "\x00")
		for i := 0; i+8 <= len(value); i++ {
			piece := value[i : i+8]
			if strings.Contains(plain, piece) && !strings.Contains(context, piece) {
				t.Fatalf("%s secret %q: its piece %q survived in\n%q\n(input %q, kinds %v)", sh.kind, value, piece, out, in, kinds)
			}
		}
		if len(kinds) == 0 {
			t.Fatalf("no kind reported for a %s secret in %q -> %q", sh.kind, in, out)
		}
	})
}
