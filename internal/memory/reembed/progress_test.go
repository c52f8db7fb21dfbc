package reembed_test

import (
	"testing"

	"github.com/engram-dev/engram/internal/memory/reembed"
)

// TestReadProgressIsOneSnapshot commits a whole fill between ReadProgress's
// read of the counter and its count of the rows left: both must describe
// the same moment (nothing filled and every row left), never the torn
// "nothing filled, nothing left" that sent the operator down the wrong
// path in a CI run.
func TestReadProgressIsOneSnapshot(t *testing.T) {
	f := newFixture(t)
	seeded := f.seed(12)
	to, emb := f.beginBuiltin(t, 768)
	var filled int64
	restore := reembed.SetBetweenProgressReads(func() {
		filled = fill(t, reembed.NewFiller(f.login, f.target, to, emb), 64)
	})
	t.Cleanup(restore) // also when fill fails the test inside the hook
	p, err := reembed.ReadProgress(ctx(t), f.login, f.target)
	restore()
	if err != nil {
		t.Fatal(err)
	}
	if filled != seeded.total() {
		t.Fatalf("the fill between the reads filled %d rows, want %d", filled, seeded.total())
	}
	if p.Filled+p.LeftTotal != seeded.total() || p.Filled != 0 {
		t.Fatalf("progress read around a committed fill: filled %d, left %d; want the moment before it: 0 filled, %d left",
			p.Filled, p.LeftTotal, seeded.total())
	}
	after, err := reembed.ReadProgress(ctx(t), f.login, f.target)
	if err != nil || after.Filled != seeded.total() || after.LeftTotal != 0 {
		t.Fatalf("progress after the fill: %+v, %v; want %d filled, 0 left", after, err, seeded.total())
	}
}
