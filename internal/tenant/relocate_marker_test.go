package tenant

import (
	"errors"
	"strings"
	"testing"
)

// TestRelocateMarkers pins the schema markers of a move: an incoming or a
// moved copy is never a home (not for a plain claim, not for an adopt
// annotation naming the suffixed UID, not for a parser that splits
// nothing), only Prepare's claim takes the incoming one, and a frozen home
// stays a home.
func TestRelocateMarkers(t *testing.T) {
	me := Owner{UID: "uid-1", Namespace: "team-a", Name: "bot"}
	incoming := parseMarker(new(me.relocateMarker(relocateIncoming, false, "")))
	moved := parseMarker(new(me.relocateMarker(relocateMoved, true, movedTo(ServerIdentity{System: "7", Database: "d;b=x", DatabaseOID: 5}))))
	frozen := parseMarker(new(me.relocateMarker("", true, "")))
	bogus := parseMarker(new("managed-by=engram; uid=uid-1+home; runtime=team-a/bot"))
	theirs := parseMarker(new(Owner{UID: "uid-2", Namespace: "team-b", Name: "bot"}.relocateMarker(relocateIncoming, false, "")))

	if incoming.uid != "uid-1+incoming" || incoming.relocate != relocateIncoming || incoming.relocateUID != "uid-1" {
		t.Fatalf("incoming marker parsed as %+v", incoming)
	}
	if moved.relocate != relocateMoved || !moved.frozen || moved.movedTo != "7/d_b_x/5" {
		t.Fatalf("moved marker parsed as %+v", moved)
	}
	if frozen.uid != "uid-1" || !frozen.frozen || frozen.relocate != "" {
		t.Fatalf("frozen marker parsed as %+v", frozen)
	}
	if bogus.relocate != "" || bogus.uid != "uid-1+home" {
		t.Fatalf("an unknown suffix parsed as %+v; want no move state and a UID of no runtime", bogus)
	}
	cases := []struct {
		name  string
		m     marker
		claim Claim
		want  claimAction
		err   error
	}{
		{"incoming, plain claim", incoming, Claim{}, 0, ErrOwnedByOther},
		{"incoming, adopt annotation naming it", incoming, Claim{AdoptFromUID: "uid-1+incoming"}, 0, ErrOwnedByOther},
		{"incoming, legacy claim", incoming, Claim{LegacySchema: true}, 0, ErrOwnedByOther},
		{"incoming, Prepare's claim", incoming, Claim{incoming: true}, claimOurs, nil},
		{"another runtime's incoming, Prepare's claim", theirs, Claim{incoming: true}, 0, ErrOwnedByOther},
		{"moved, plain claim", moved, Claim{}, 0, ErrOwnedByOther},
		{"moved, adopt annotation naming it", moved, Claim{AdoptFromUID: "uid-1+moved"}, 0, ErrOwnedByOther},
		{"moved, Prepare's claim", moved, Claim{incoming: true}, 0, ErrOwnedByOther},
		{"frozen home", frozen, Claim{}, claimOurs, nil},
		{"unknown suffix", bogus, Claim{}, 0, ErrOwnedByOther},
	}
	for _, c := range cases {
		got, err := decideClaim(true, c.m, me, c.claim, "schema", "s", false)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, got, err, c.want, c.err)
		}
	}
	// A parser without the move fields (an older operator) compares the
	// whole uid value: no runtime has "uid-1+incoming" for UID.
	for _, m := range []marker{incoming, moved} {
		if m.uid == me.UID || mustOwn(m, me, "schema", "s") == nil {
			t.Errorf("marker %+v is taken as uid-1's by uid comparison", m)
		}
	}
	_, err := decideClaim(true, moved, me, Claim{}, "schema", "s", false)
	if err == nil || !strings.Contains(err.Error(), "old copy (moved to 7/d_b_x/5)") {
		t.Errorf("refusal of a moved copy: %v; want it to say where it went", err)
	}
}

// TestRelocateMatchTables: the copy follows the target's catalog; a source
// with another column (a re-embed's embedding_next), another vector size
// or another table is refused, and column order (an upgraded source adds
// columns last) does not matter (readTables sorts by name).
func TestRelocateMatchTables(t *testing.T) {
	col := func(name, typ string, mod int32) relocCol { return relocCol{name: name, typname: typ, typmod: mod} }
	id := col("id", "uuid", -1)
	target := []relocTab{{name: "memories", cols: []relocCol{col("content", "text", -1), col("embedding", "vector", 384), id}, pk: []relocCol{id}}}
	same := []relocTab{{name: "memories", cols: []relocCol{col("content", "text", -1), col("embedding", "vector", 384), id}, pk: []relocCol{id}}}
	if err := matchTables(target, same); err != nil {
		t.Fatalf("same tables: %v", err)
	}
	for name, src := range map[string][]relocTab{
		"extra column": {{name: "memories", cols: []relocCol{col("content", "text", -1), col("embedding", "vector", 384),
			col("embedding_next", "vector", 768), id}, pk: []relocCol{id}}},
		"other vector size": {{name: "memories", cols: []relocCol{col("content", "text", -1), col("embedding", "vector", 768), id}, pk: []relocCol{id}}},
		"other table":       {{name: "memorias", cols: target[0].cols, pk: []relocCol{id}}},
		"no table":          nil,
	} {
		if err := matchTables(target, src); !errors.Is(err, ErrRelocateSchemaMismatch) {
			t.Errorf("%s: %v; want ErrRelocateSchemaMismatch", name, err)
		}
	}
}
