package tenant

// Security review (issue 12): holes found by attacking provisioning as a
// hostile tenant. Each test fails while the hole is open.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// longVictimSchema is the default schema of a runtime whose namespace and
// name are long enough that its role names are cut (fitIdentifier).
func longVictimSchema(t *testing.T) string {
	t.Helper()
	s := SchemaName("payments-platform-team", "customer-support-memory-"+strings.Repeat("x", 6))
	if len(s)+len("_owner") <= MaxIdentifierBytes {
		t.Fatalf("precondition: %q is not long enough to cut its role names", s)
	}
	return s
}

// collidingSchema is a valid schema name, other than victim, whose owner
// role (suffix "_owner") or login role (suffix "_app") is exactly victim's:
// fitIdentifier cuts victim's role name to base[:n] + "_" + 8 hex of
// SHA-256(victim) + suffix, which is also the uncut role name of the
// schema base[:n] + "_" + those 8 hex digits.
func collidingSchema(victim, suffix string) string {
	sum := sha256.Sum256([]byte(victim))
	tag := "_" + hex.EncodeToString(sum[:4])
	return victim[:MaxIdentifierBytes-len(tag)-len(suffix)] + tag
}

// TestReviewRoleNamesAreInjective: default schema names are injective, but
// the role names derived from them are not: a tenant can name (in
// spec.database.schema) a schema whose owner or login role is the
// truncated role of another tenant's long default schema.
func TestReviewRoleNamesAreInjective(t *testing.T) {
	victim := longVictimSchema(t)
	for _, c := range []struct {
		suffix string
		role   func(string) string
	}{{"_owner", OwnerRole}, {"_app", LoginRole}} {
		other := collidingSchema(victim, c.suffix)
		if !ValidSchemaName(other) || other == victim {
			t.Fatalf("precondition: %q", other)
		}
		if c.role(other) == c.role(victim) {
			t.Errorf("schemas %q and %q share the role %q", victim, other, c.role(victim))
		}
	}
}

// TestReviewSquattingRefusesAnotherTenant: a hostile tenant provisions,
// before its victim exists, a schema chosen so that it holds the victim's
// future default schema (spec.database.schema = SchemaName(victim ns,
// name), public inputs) or only the victim's owner role (a name that does
// not even look like the victim's). When the victim's runtime is created,
// its provisioning is refused for good (SchemaOwnedByOther): the UID
// marker keeps the data apart, but nothing stops the denial of service,
// and with reclaimPolicy Retain the squat outlives the attacker's runtime.
func TestReviewSquattingRefusesAnotherTenant(t *testing.T) {
	victimOwner := Owner{UID: "uid-victim", Namespace: "payments-platform-team", Name: "customer-support-memory-xxxxxx"}
	thief := Owner{UID: "uid-thief", Namespace: "thief", Name: "squat"}
	victim := longVictimSchema(t)
	if victim != SchemaName(victimOwner.Namespace, victimOwner.Name) {
		t.Fatal("precondition: victim schema")
	}
	for _, squat := range []struct{ name, schema string }{
		{"the victim's default schema", victim},
		{"a schema holding the victim's owner role", collidingSchema(victim, "_owner")},
	} {
		t.Run(squat.name, func(t *testing.T) {
			pool, url := adminPool(t) // a database (and roles) of its own
			ctx := testCtx(t)
			mustProvision(t, pool, url, Spec{Schema: squat.schema, Dimensions: 3, Owner: thief})
			dropRolesAfter(t, url, victim)
			_, err := Provision(ctx, pool, Spec{Schema: victim, Dimensions: 3, Owner: victimOwner})
			if errors.Is(err, ErrOwnedByOther) {
				t.Fatalf("a tenant that did not exist yet is locked out of its default schema by another namespace: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Drop(ctx, pool, victim, victimOwner); err != nil {
				t.Fatal(err)
			}
			if _, err := Drop(ctx, pool, squat.schema, thief); err != nil {
				t.Fatal(err)
			}
		})
	}
}
