package memory

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// jsonPieces are the parts random strings are made of: what encoding/json
// escapes (HTML characters, controls, quotes, U+2028/9, invalid UTF-8) and
// what it does not.
var jsonPieces = []string{"a", "memory ", "<", ">", "&", `"`, `\`, "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
	"é", "日本", "\u2028", "\u2029", "\xff", "\xe2\x80", "😀", "[REDACTED:jwt]", "/", "'"}

func randomJSONString(r *rand.Rand) string {
	var b bytes.Buffer
	for range r.IntN(6) {
		b.WriteString(jsonPieces[r.IntN(len(jsonPieces))])
	}
	return b.String()
}

var jsonFloats = []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e-6, 9.99e-7, 1e-7, 1.5e-300, 1e20, 1e21, 123456789.125, -3.4e38, 0.7071067811865476}

func randomFloat(r *rand.Rand) float64 {
	if r.IntN(2) == 0 {
		return jsonFloats[r.IntN(len(jsonFloats))]
	}
	return (r.Float64()*2 - 1) * math.Pow(10, float64(r.IntN(50)-25))
}

func randomTime(r *rand.Rand) time.Time {
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+30*60), time.FixedZone("y", -8*3600), time.Local}
	t := time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
	if r.IntN(4) == 0 {
		t = t.Truncate(time.Second)
	}
	return t
}

func randomStrings(r *rand.Rand) []string {
	switch r.IntN(3) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	out := make([]string, 1+r.IntN(3))
	for i := range out {
		out[i] = randomJSONString(r)
	}
	return out
}

func randomMemory(r *rand.Rand) Memory {
	opt := func(s string) string {
		if r.IntN(2) == 0 {
			return ""
		}
		return s
	}
	m := Memory{ID: randomJSONString(r), Owner: randomJSONString(r), Agent: opt(randomJSONString(r)), Session: opt(randomJSONString(r)),
		SourceSession: opt(randomJSONString(r)), Source: Source(randomJSONString(r)), Category: randomJSONString(r),
		Content: randomJSONString(r), Importance: r.IntN(21) - 10, Flags: randomStrings(r), Active: r.IntN(2) == 0,
		SupersededBy: opt(randomJSONString(r)), CreatedAt: randomTime(r), UpdatedAt: randomTime(r), AccessCount: r.Int64() - r.Int64(),
		Tags: randomStrings(r), Withheld: r.IntN(2) == 0}
	if r.IntN(2) == 0 {
		t := randomTime(r)
		m.ExpiresAt = &t
	}
	if r.IntN(2) == 0 {
		t := randomTime(r)
		m.LastAccessedAt = &t
	}
	switch r.IntN(4) {
	case 0:
		m.Metadata = json.RawMessage(`{"a": 1, "b": ["<x>", "&"], "c": {"d": null}}`)
	case 1:
		m.Metadata = json.RawMessage(`{}`)
	case 2:
		m.Metadata = json.RawMessage{}
	}
	return m
}

func randomSearchResult(r *rand.Rand) *SearchResult {
	res := &SearchResult{Truncated: r.IntN(2) == 0, Omitted: r.IntN(3)}
	if r.IntN(8) != 0 {
		res.Results = make([]SearchHit, r.IntN(12))
	}
	for i := range res.Results {
		h := SearchHit{Memory: randomMemory(r), Score: randomFloat(r), VectorScore: randomFloat(r), TextScore: randomFloat(r), DecayScore: randomFloat(r)}
		if r.IntN(2) == 0 {
			h.RerankScore = new(randomFloat(r))
		}
		res.Results[i] = h
	}
	if r.IntN(2) == 0 {
		res.Reranked = new(r.IntN(2) == 0)
		res.RerankReason = randomJSONString(r)
	}
	return res
}

// TestSearchResultAppendJSONMatchesMarshal: the search answer's own JSON
// is what encoding/json writes, byte for byte, over random answers with
// every field set or not and strings made of what JSON escapes.
func TestSearchResultAppendJSONMatchesMarshal(t *testing.T) {
	checkMatchesMarshal(t, 1, func(r *rand.Rand) jsonAppender { return randomSearchResult(r) })
}

// checkMatchesMarshal: AppendJSON writes what Marshal writes, on 3,000
// random values of gen (seeded with seed).
func checkMatchesMarshal(t *testing.T, seed uint64, gen func(*rand.Rand) jsonAppender) {
	t.Helper()
	r := rand.New(rand.NewPCG(32, seed))
	for i := range 3000 {
		v := gen(r)
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("case %d: Marshal: %v", i, err)
		}
		got, ok := v.AppendJSON(nil)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("case %d: AppendJSON (ok %v)\n got %s\nwant %s", i, ok, got, want)
		}
	}
}

// TestSearchResultAppendJSONRefusesWhatMarshalRefuses: a value
// encoding/json cannot write is reported (false), so writeJSON lets
// encoding/json answer with its error, as before.
func TestSearchResultAppendJSONRefusesWhatMarshalRefuses(t *testing.T) {
	hit := func(mod func(*SearchHit)) *SearchResult {
		h := SearchHit{Memory: Memory{ID: "x", CreatedAt: time.Unix(0, 0), UpdatedAt: time.Unix(0, 0)}}
		mod(&h)
		return &SearchResult{Results: []SearchHit{h}}
	}
	checkRefusals(t, map[string]jsonAppender{
		"NaN score":        hit(func(h *SearchHit) { h.Score = math.NaN() }),
		"infinite rerank":  hit(func(h *SearchHit) { h.RerankScore = new(math.Inf(1)) }),
		"year 10000":       hit(func(h *SearchHit) { h.Memory.UpdatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }),
		"invalid metadata": hit(func(h *SearchHit) { h.Memory.Metadata = json.RawMessage(`{"a":`) }),
	})
}

// jsonAppender is an answer that writes its own JSON (server.writeJSON).
type jsonAppender interface {
	AppendJSON(b []byte) ([]byte, bool)
}

// checkRefusals: each value is one Marshal refuses, and AppendJSON says so.
func checkRefusals(t *testing.T, cases map[string]jsonAppender) {
	t.Helper()
	for name, v := range cases {
		if _, err := json.Marshal(v); err == nil {
			t.Fatalf("%s: Marshal accepts it; the case tests nothing", name)
		}
		if _, ok := v.AppendJSON(nil); ok {
			t.Errorf("%s: AppendJSON says ok where Marshal fails", name)
		}
	}
}

// checkFieldCounts: each type has the number of fields file writes.
func checkFieldCounts(t *testing.T, file string, counts map[reflect.Type]int) {
	t.Helper()
	for typ, n := range counts {
		if typ.NumField() != n {
			t.Errorf("%v has %d fields, %s writes %d: update AppendJSON and this count", typ, typ.NumField(), file, n)
		}
	}
}

// TestAnswerJSONKnowsEveryField: a field added to the answer's types must
// be added to answerjson.go too (the random test would not set it).
func TestAnswerJSONKnowsEveryField(t *testing.T) {
	checkFieldCounts(t, "answerjson.go", map[reflect.Type]int{
		reflect.TypeFor[SearchResult](): 5, reflect.TypeFor[SearchHit](): 6, reflect.TypeFor[Memory](): 20,
	})
}
