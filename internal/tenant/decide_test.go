package tenant

import (
	"errors"
	"strings"
	"testing"
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
		if err := decideDimensions("s1", 384, 384); err != nil {
			t.Errorf("same size: %v", err)
		}
		err := decideDimensions("s1", 384, 768)
		if !errors.Is(err, ErrDimensionsMismatch) {
			t.Fatalf("other size: %v, want ErrDimensionsMismatch", err)
		}
		if want := `schema "s1" stores 384-dimensional vectors, the spec asks for 768`; !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	})
}
