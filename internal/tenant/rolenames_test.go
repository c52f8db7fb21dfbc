package tenant

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestRoleNamesAreNeverCut: default schema names leave room for the role
// suffixes, so a role name is always "<schema>_owner" / "<schema>_app".
func TestRoleNamesAreNeverCut(t *testing.T) {
	for _, p := range [][2]string{
		{"payments-platform-team", "customer-support-memory-xxxxxx"},
		{strings.Repeat("n", 63), strings.Repeat("r", 53)},
		{"a", "b"},
	} {
		s := SchemaName(p[0], p[1])
		if len(s) > MaxSchemaBytes || !ValidSchemaName(s) {
			t.Errorf("SchemaName(%q, %q) = %q (%d bytes, max %d)", p[0], p[1], s, len(s), MaxSchemaBytes)
		}
		if OwnerRole(s) != s+"_owner" || LoginRole(s) != s+"_app" {
			t.Errorf("roles of %q are cut: %q, %q", s, OwnerRole(s), LoginRole(s))
		}
	}
}

// TestCutRoleNamesCannotBeClaimed is the squat the security review found:
// the cut role name of a long schema (earlier releases allowed 63 bytes)
// is also the uncut role name of one chosen schema. That schema is longer
// than MaxSchemaBytes, which the CRD refuses, so no runtime can take the
// role of a long legacy schema.
func TestCutRoleNamesCannotBeClaimed(t *testing.T) {
	legacy := LegacySchemaName("payments-platform-team", "customer-support-memory-"+strings.Repeat("x", 20))
	if len(legacy)+len("_owner") <= MaxIdentifierBytes {
		t.Fatalf("precondition: %q does not have cut role names", legacy)
	}
	for _, suffix := range []string{"_owner", "_app"} {
		sum := sha256.Sum256([]byte(legacy))
		tag := "_" + hex.EncodeToString(sum[:4])
		claimer := legacy[:MaxIdentifierBytes-len(tag)-len(suffix)] + tag
		if fitIdentifier(claimer, suffix) != fitIdentifier(legacy, suffix) {
			t.Fatalf("precondition: %q does not reproduce the cut role of %q", claimer, legacy)
		}
		if len(claimer) <= MaxSchemaBytes {
			t.Errorf("a schema of %d bytes (%q) holds the cut %s role of %q; schemas must be at most %d bytes", len(claimer), claimer, suffix, legacy, MaxSchemaBytes)
		}
	}
}
