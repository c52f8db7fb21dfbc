package extractive

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkSummarize: a leaf's input (20 messages) and an episode's
// (about 8,000 characters), summarized to a third of their tokens.
func BenchmarkSummarize(b *testing.B) {
	for _, size := range []struct {
		name  string
		turns int
	}{{"leaf-20-messages", 20}, {"episode-100-messages", 100}} {
		c := generate(rand.New(rand.NewPCG(3, 4)), size.turns)
		in := 0
		for _, t := range c.turns {
			in += tokens(prefix(t.Speaker) + t.Text)
		}
		b.Run(size.name, func(b *testing.B) {
			for b.Loop() {
				Summarize(c.turns, max(48, min(600, in/3)), tokens)
			}
		})
	}
}
