package main

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
)

// corpus makes memory texts deterministically from (owner, index), so the
// harness can regenerate any stored memory (to build queries that have true
// neighbours) without keeping 200k strings around. Words are pseudo-words
// from syllables: English stop words and secret- or injection-like strings
// never occur, so redaction and the injection guard do their scans but
// change nothing, and two memories share few words (cosine near 0 with the
// builtin embedder), so dedup inserts rather than merges.
type corpus struct {
	words []string
}

// categories of the default policy, with a phrase that reads like each.
var categoryPhrases = []struct{ category, phrase string }{
	{"identity", "user identity"},
	{"preference", "user prefers"},
	{"project", "project uses"},
	{"contextual", "user mentioned"},
}

func newCorpus() *corpus {
	syll := []string{"ka", "lo", "mi", "ren", "tas", "vo", "zu", "bel", "cor", "dan", "fi", "gru",
		"hep", "jor", "kel", "lim", "mon", "nar", "pol", "quin", "ros", "sef", "tum", "ul", "vin",
		"wex", "yar", "zel", "ast", "bri"}
	seen := map[string]bool{}
	var words []string
	rng := rand.New(rand.NewPCG(7, 11))
	for len(words) < 5000 {
		var b strings.Builder
		for range 2 + rng.IntN(2) {
			b.WriteString(syll[rng.IntN(len(syll))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	return &corpus{words: words}
}

// item is one memory to write.
type item struct {
	Content    string `json:"content"`
	Category   string `json:"category"`
	Importance int    `json:"importance"`
}

// rngFor seeds a generator from a key, so the same key gives the same text.
func rngFor(key string) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	s := h.Sum64()
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// stored is memory i of owner as loaded.
func (c *corpus) stored(owner string, i int) item {
	return c.sentence(rngFor(fmt.Sprintf("%s/%d", owner, i)))
}

// fresh is a new memory no owner has (for the add workload).
func (c *corpus) fresh(rng *rand.Rand) item { return c.sentence(rng) }

func (c *corpus) sentence(rng *rand.Rand) item {
	cp := categoryPhrases[rng.IntN(len(categoryPhrases))]
	n := 7 + rng.IntN(7)
	parts := make([]string, 0, n+1)
	parts = append(parts, cp.phrase)
	for range n {
		parts = append(parts, c.words[rng.IntN(len(c.words))])
	}
	return item{Content: strings.Join(parts, " "), Category: cp.category, Importance: 1 + rng.IntN(10)}
}

// query is a search text about memory i of owner: some of its words plus
// one unrelated word, the way a user rephrases what they said before.
func (c *corpus) query(rng *rand.Rand, owner string, i int) string {
	words := strings.Fields(c.stored(owner, i).Content)[2:] // without the category phrase
	rng.Shuffle(len(words), func(a, b int) { words[a], words[b] = words[b], words[a] })
	keep := words[:min(len(words), 3+rng.IntN(3))]
	return strings.Join(append(keep, c.words[rng.IntN(len(c.words))]), " ")
}
