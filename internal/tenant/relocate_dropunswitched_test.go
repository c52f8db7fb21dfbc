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

// TestDropUnswitchedDropsTheFinishedCopy: the copy Finish made this
// runtime's home-marked copy on the move's target, never switched to, is
// dropped there (an abort or a failure past Finish), and only there: not
// through a target pool repointed at the source, not when the target's
// identity cannot be proven by its system identifier.
func TestDropUnswitchedDropsTheFinishedCopy(t *testing.T) {
	e := newCopiedMove(t, 50)
	ctx, s, rel := testCtx(t), e.spec.Schema, e.rel
	if err := rel.Freeze(ctx); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	if _, err := rel.CatchUp(ctx); err != nil {
		t.Fatalf("CatchUp: %v", err)
	}
	if _, err := rel.Verify(ctx); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if err := rel.Finish(ctx); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	from, err := Identify(ctx, e.src)
	if err != nil {
		t.Fatal(err)
	}
	to, err := Identify(ctx, e.dst)
	if err != nil {
		t.Fatal(err)
	}
	repointed := rel
	repointed.Target = e.src
	if err := repointed.DropUnswitched(ctx, from, to); !errors.Is(err, ErrRelocateNotIncoming) {
		t.Fatalf("DropUnswitched through a target pool that reaches the source: %v; want ErrRelocateNotIncoming", err)
	}
	unproven := to
	unproven.System = ""
	if err := rel.DropUnswitched(ctx, from, unproven); !errors.Is(err, ErrRelocateNotIncoming) {
		t.Fatalf("DropUnswitched without the target's system identifier: %v; want ErrRelocateNotIncoming", err)
	}
	if held, err := HoldsTenant(ctx, e.dst, s, e.spec.Owner, Claim{}); err != nil || !held {
		t.Fatalf("the finished copy is gone after refused drops (held %v, %v)", held, err)
	}
	if err := rel.DropUnswitched(ctx, from, to); err != nil {
		t.Fatalf("DropUnswitched of the finished copy on the move's target: %v", err)
	}
	if scalar[bool](t, e.dst, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", s) {
		t.Fatal("the finished copy is still on the target")
	}
	if held, err := HoldsTenant(ctx, e.src, s, e.spec.Owner, Claim{}); err != nil || !held {
		t.Fatalf("the source is no longer the tenant's home (held %v, %v)", held, err)
	}
}
