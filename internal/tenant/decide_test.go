package tenant

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDecideProvisioning pins the provisioning decisions without a
// database: what happens to an existing (or missing) schema, by its
// ownership marker, and to an existing schema of another vector size.
func TestDecideProvisioning(t *testing.T) {
	me := Owner{UID: "uid-1", Namespace: "team-a", Name: "bot"}
	ours := parseMarker(new(me.marker()))
	other := parseMarker(new(Owner{UID: "uid-2", Namespace: "team-b", Name: "bot"}.marker()))
	earlier := parseMarker(new(Owner{UID: "uid-0", Namespace: "team-a", Name: "bot"}.marker()))
	legacy := parseMarker(new("managed-by=engram; tenant=team-a/bot"))
	foreign := parseMarker(new("created by the DBA"))

	cases := []struct {
		name   string
		exists bool
		m      marker
		claim  Claim
		want   claimAction
		err    error
	}{
		{"fresh", false, marker{}, Claim{}, claimCreate, nil},
		{"exists-ours", true, ours, Claim{}, claimOurs, nil},
		{"exists-other", true, other, Claim{}, 0, ErrOwnedByOther},
		{"exists-other with an adopt annotation for another UID", true, other, Claim{AdoptFromUID: "uid-0"}, 0, ErrOwnedByOther},
		{"marker-missing", true, marker{}, Claim{}, 0, ErrNotManaged},
		{"foreign comment", true, foreign, Claim{}, 0, ErrNotManaged},
		{"earlier runtime of the same name", true, earlier, Claim{}, 0, ErrOwnedByOther},
		{"earlier runtime, adopted", true, earlier, Claim{AdoptFromUID: "uid-0"}, claimRemark, nil},
		{"legacy marker, recorded in status", true, legacy, Claim{LegacySchema: true}, claimRemark, nil},
		{"legacy marker, not recorded", true, legacy, Claim{}, 0, ErrOwnedByOther},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := decideClaim(c.exists, c.m, me, c.claim, "schema", "s1", false)
			if !errors.Is(err, c.err) || (c.err == nil && err != nil) {
				t.Fatalf("error = %v, want %v", err, c.err)
			}
			if err == nil && got != c.want {
				t.Errorf("action = %d, want %d", got, c.want)
			}
		})
	}

	t.Run("dimensions-mismatch", func(t *testing.T) {
		if err := decideDimensions("s1", 384, 384, 0); err != nil {
			t.Errorf("same size: %v", err)
		}
		// A re-embed to 768 whose switch committed before it was recorded.
		if err := decideDimensions("s1", 768, 384, 768); err != nil {
			t.Errorf("the size a re-embed switches to: %v", err)
		}
		if err := decideDimensions("s1", 512, 384, 768); !errors.Is(err, ErrDimensionsMismatch) {
			t.Errorf("a size neither recorded nor switched to: %v, want ErrDimensionsMismatch", err)
		}
		err := decideDimensions("s1", 384, 768, 0)
		if !errors.Is(err, ErrDimensionsMismatch) {
			t.Fatalf("other size: %v, want ErrDimensionsMismatch", err)
		}
		if want := `schema "s1" stores 384-dimensional vectors, the runtime records 768`; !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	})
}

// TestDecideBlocker pins the blocker watcher's rule: another tenant's
// session is ended once its transaction is older than the maximum age, or
// once this provisioning has waited that long in total for other tenants
// (a tenant opening a fresh transaction for each index build gains
// nothing) and a second look still finds it in the way; any other session is only reported, after it has been in the
// way for the maximum age.
func TestDecideBlocker(t *testing.T) {
	const maxAge = time.Minute
	s := time.Second
	for _, tc := range []struct {
		name                   string
		kind                   BlockerKind
		openFor, inWay, waited time.Duration
		want                   blockerAction
	}{
		{"other tenant, young", BlockerOtherTenant, 10 * s, 2 * s, 2 * s, blockerWait},
		{"other tenant, open for the max age", BlockerOtherTenant, maxAge, 1 * s, 1 * s, blockerEnd},
		{"other tenant, open for hours, just seen", BlockerOtherTenant, 3 * time.Hour, 0, 0, blockerEnd},
		{"other tenant, fresh, but the budget is spent", BlockerOtherTenant, 1 * s, 1 * s, maxAge, blockerEnd},
		{"other tenant, budget spent, first seen at this look", BlockerOtherTenant, 100 * time.Millisecond, 0, maxAge, blockerWait},
		{"other tenant, in the way for the max age", BlockerOtherTenant, maxAge, maxAge, maxAge, blockerEnd},
		{"same tenant, open for hours", BlockerSameTenant, 3 * time.Hour, 10 * s, 10 * s, blockerWait},
		{"same tenant, in the way for the max age", BlockerSameTenant, maxAge, maxAge, 0, blockerReport},
		{"same tenant, budget spent on others", BlockerSameTenant, 1 * s, 1 * s, 2 * maxAge, blockerWait},
		{"not a tenant, open for hours", BlockerNotTenant, 3 * time.Hour, 10 * s, 0, blockerWait},
		{"not a tenant, in the way for the max age", BlockerNotTenant, maxAge, maxAge, 0, blockerReport},
	} {
		if got := decideBlocker(tc.kind, tc.openFor, tc.inWay, tc.waited, maxAge, s); got != tc.want {
			t.Errorf("%s: decideBlocker = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestClassifyBlocker: only a login role, not a superuser, whose comment
// carries Engram's marker with a UID is a tenant; the UID decides whether
// it is the provisioned runtime's own.
func TestClassifyBlocker(t *testing.T) {
	w := &blockerWatch{self: Owner{UID: "uid-b", Namespace: "team-b", Name: "bot"}}
	other := Owner{UID: "uid-a", Namespace: "team-a", Name: "bot"}.marker()
	self := w.self.marker()
	for _, tc := range []struct {
		name    string
		canBe   bool
		comment *string
		want    BlockerKind
		tenant  Owner
	}{
		{"another tenant", true, &other, BlockerOtherTenant, Owner{UID: "uid-a", Namespace: "team-a", Name: "bot"}},
		{"the same tenant", true, &self, BlockerSameTenant, w.self},
		{"no comment", true, nil, BlockerNotTenant, Owner{}},
		{"a DBA's comment", true, new("the reporting role"), BlockerNotTenant, Owner{}},
		{"legacy marker without a UID", true, new("managed-by=engram"), BlockerNotTenant, Owner{}},
		{"a superuser or NOLOGIN role with a marker", false, &other, BlockerNotTenant, Owner{}},
	} {
		got := w.classify(blockingSession{pid: 7, role: "r", canBe: tc.canBe, comment: tc.comment})
		if got.Kind != tc.want || got.Tenant != tc.tenant {
			t.Errorf("%s: classify = %s %+v, want %s %+v", tc.name, got.Kind, got.Tenant, tc.want, tc.tenant)
		}
	}
}
