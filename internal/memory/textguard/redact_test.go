package textguard

import (
	"slices"
	"strings"
	"testing"
)

func TestRedaction(t *testing.T) {
	r, err := NewRedactor(true, []string{`EMP-[0-9]{6}`})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, in, kind, secret string
	}{
		{"aws access key", "deploy with AKIAIOSFODNN7EXAMPLE please", "aws_access_key", "AKIAIOSFODNN7EXAMPLE"},
		{"aws secret", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		{"github pat classic", "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 works", "github_token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"},
		{"github fine-grained", "github_pat_11ABCDEFG0abcdefghijklmnopqrstuvwxyz", "github_token", "github_pat_11ABCDEFG0abcdefghijklmnopqrstuvwxyz"},
		{"gitlab", "use glpat-abcdefghij1234567890 for CI", "gitlab_token", "glpat-abcdefghij1234567890"},
		{"openai", "key is sk-proj-abcdefghijklmnopqrstuvwx1234", "openai_key", "sk-proj-abcdefghijklmnopqrstuvwx1234"},
		{"anthropic", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "anthropic_key", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"},
		{"slack", "bot token xoxb-1234567890-abcdefghij", "slack_token", "xoxb-1234567890-abcdefghij"},
		{"jwt", "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.abcdefghijklmnop", "jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.abcdefghijklmnop"},
		{"private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "private_key", "MIIEow"},
		{"bearer", "curl -H 'Authorization: Bearer abc123def456ghi'", "bearer_token", "abc123def456ghi"},
		{"basic", "Authorization: Basic dXNlcjpodW50ZXIy", "basic_auth", "dXNlcjpodW50ZXIy"},
		{"url password", "db at postgres://app:s3cr3t@db:5432/x", "url_password", "s3cr3t"},
		{"password assignment", "password=hunter2", "password", "hunter2"},
		{"api_key assignment", `api_key: "abcd1234"`, "password", "abcd1234"},
		{"password in prose", "my password is correcthorse", "password", "correcthorse"},
		{"custom pattern", "employee EMP-123456 asked", "custom", "EMP-123456"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, kinds := r.Redact(tc.in)
			if strings.Contains(out, tc.secret) {
				t.Fatalf("secret survived: %q", out)
			}
			if !slices.Contains(kinds, tc.kind) || !strings.Contains(out, "[REDACTED:"+tc.kind+"]") {
				t.Fatalf("redact(%q) = %q, kinds %v; want kind %s", tc.in, out, kinds, tc.kind)
			}
		})
	}
	if out, _ := r.Redact("db at postgres://app:s3cr3t@db:5432/x"); out != "db at postgres://app:[REDACTED:url_password]@db:5432/x" {
		t.Errorf("url password redaction mangled the URL: %q", out)
	}
	for _, clean := range []string{
		"User prefers dark mode and basic understanding of Go",
		"The password policy requires 12 characters", "Call me at 10am", "Basic English only",
		"skiing is a hobby", "She works at AKIA corp",
	} {
		if out, kinds := r.Redact(clean); out != clean || len(kinds) != 0 {
			t.Errorf("clean text changed: %q -> %q (%v)", clean, out, kinds)
		}
	}
	off, _ := NewRedactor(false, nil)
	if out, _ := off.Redact("password=hunter2"); out != "password=hunter2" {
		t.Errorf("builtin patterns off still redacted: %q", out)
	}
}
