package modelapi

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// builtinEmbedder is a deterministic local embedder: feature hashing of word
// unigrams and bigrams with signed hashing, L2-normalized. It needs no
// network and no model, so every runtime works out of the box; sentences
// that share words score high, unrelated ones near 0. It knows no synonyms:
// use an OpenAI-compatible model for semantic recall.
type builtinEmbedder struct {
	dims int
}

// NewBuiltinEmbedder returns the builtin embedder with dims (64..4096) dimensions.
func NewBuiltinEmbedder(dims int) (Embedder, error) {
	if dims < 64 || dims > 4096 {
		return nil, fmt.Errorf("builtin embedder: dimensions %d must be within 64..4096", dims)
	}
	return &builtinEmbedder{dims: dims}, nil
}

func (b *builtinEmbedder) Dimensions() int { return b.dims }

func (b *builtinEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i] = b.embedOne(t)
	}
	return out, nil
}

const bigramWeight = 0.5

func (b *builtinEmbedder) embedOne(text string) []float32 {
	v := make([]float64, b.dims)
	words := featureWords(text)
	if len(words) == 0 {
		// No words at all (only punctuation or symbols): hash the text itself
		// so the vector is not zero, whose cosine distance is undefined.
		words = []string{"\x00" + strings.TrimSpace(text)}
	}
	for i, w := range words {
		b.add(v, w, 1)
		if i > 0 {
			b.add(v, words[i-1]+" "+w, bigramWeight)
		}
	}
	return b.unit(v, text)
}

// unit is v scaled to length 1. Signed features can cancel out to a zero
// vector (words and bigrams that collide with opposite signs), whose
// scaling would be NaN in every dimension, which PostgreSQL refuses in a
// vector: such a text gets the unit vector of one dimension its whole
// text hashes to, like a text of one unknown word.
func (b *builtinEmbedder) unit(v []float64, text string) []float32 {
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	if norm == 0 {
		b.add(v, "\x00"+text, 1)
		norm = 1
	}
	norm = math.Sqrt(norm)
	out := make([]float32, b.dims)
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}

// add hashes feature into one dimension with a sign from another hash bit,
// so collisions cancel out on average instead of piling up.
func (b *builtinEmbedder) add(v []float64, feature string, weight float64) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(feature))
	sum := h.Sum64()
	idx := int(sum % uint64(b.dims))
	if sum>>63 == 1 {
		weight = -weight
	}
	v[idx] += weight
}

// featureWords lower-cases text, splits it into words of letters and digits,
// drops common English stop words (unless nothing else is left) and strips a
// plural or third-person "s", so "The user likes cats" ~ "user like cat".
func featureWords(text string) []string {
	raw := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	words := make([]string, 0, len(raw))
	for _, w := range raw {
		if !stopWords[w] {
			words = append(words, stem(w))
		}
	}
	if len(words) == 0 {
		for _, w := range raw {
			words = append(words, stem(w))
		}
	}
	return words
}

func stem(w string) string {
	if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
		return w[:len(w)-1]
	}
	return w
}

var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or but if of at by for with about to from in on into over under
		is are was were be been being am do does did has have had having i me my we our you your he him his she her
		it its they them their this that these those there here so than too very can will just should would could
		s t as up out then also`) {
		m[w] = true
	}
	return m
}()
