package reembed_test

import (
	"testing"

	"github.com/engram-dev/engram/internal/memory/reembed"
)

// A second re-embed on a tenant whose first switch installed the guard:
// the guard depends on the column the second switch drops.
func TestReembedTwiceDropsTheFirstGuard(t *testing.T) {
	f := newFixture(t)
	f.seed(4)
	_, emb := builtin(t, 384)
	b := reembed.Named("openai", "model-b", 384)
	c := reembed.Named("openai", "model-c", 384)
	if err := reembed.Begin(ctx(t), f.admin, f.target, f.from, b); err != nil {
		t.Fatal(err)
	}
	fill(t, reembed.NewFiller(f.login, f.target, b, emb), 64)
	if err := reembed.Switch(ctx(t), f.admin, f.target); err != nil {
		t.Fatal(err)
	}
	if err := reembed.Begin(ctx(t), f.admin, f.target, b, c); err != nil {
		t.Fatalf("second Begin: %v", err)
	}
	fill(t, reembed.NewFiller(f.login, f.target, c, emb), 64)
	if err := reembed.Switch(ctx(t), f.admin, f.target); err != nil {
		t.Fatalf("second Switch: %v", err)
	}
	p, err := reembed.ReadProgress(ctx(t), f.admin, f.target)
	if err != nil || p.Current != c || p.Phase != reembed.PhaseIdle {
		t.Fatalf("after the second switch: %+v, %v; want idle on %s", p.State, err, c)
	}
}
