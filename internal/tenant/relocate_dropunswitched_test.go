package tenant

import (
	"errors"
	"testing"
)

// TestDropUnswitchedNeverDropsTheHome (review 15, H1): a home-marked copy
// carries the same marker as the tenant's live home, so DropUnswitched
// drops one only on the server the move copied to. A target connection
// repointed at the home's server (here: the "target" pool reaches the
// home) is refused and the home stays.
func TestDropUnswitchedNeverDropsTheHome(t *testing.T) {
	ctx := testCtx(t)
	pool, url := adminPool(t)
	schema := uniqueSchema(t, "dropunsw")
	spec := newSpec(schema, 8)
	mustProvision(t, pool, url, spec)
	home, err := Identify(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := ServerIdentity{System: "1", Database: "other", DatabaseOID: home.DatabaseOID + 1}
	rel := Relocation{Schema: schema, Owner: spec.Owner, Source: pool, Target: pool}

	for _, c := range []struct {
		name     string
		from, to ServerIdentity
	}{
		{"the move's target is another server", home, elsewhere},
		{"the recorded home is this server", home, home},
	} {
		err := rel.DropUnswitched(ctx, c.from, c.to)
		if !errors.Is(err, ErrRelocateNotIncoming) {
			t.Errorf("%s: DropUnswitched on the live home = %v, want ErrRelocateNotIncoming", c.name, err)
		}
		held, err := HoldsTenant(ctx, pool, schema, spec.Owner, Claim{})
		if err != nil || !held {
			t.Fatalf("%s: the home is gone after a refused DropUnswitched (held %v, %v)", c.name, held, err)
		}
	}
}
