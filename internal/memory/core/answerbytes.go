package core

import (
	"encoding/json"
	"math"
)

// Unbounded is the bound of an item whose size only measuring tells: it
// never fits a budget on its bound, so it is always measured.
const Unbounded = math.MaxInt / 2

// Bounded is an item of an answer that bounds its own JSON size by reading
// lengths only (every byte of text escapes to at most 6): the types of
// conversation and long-term memory, which this package does not know.
type Bounded interface {
	JSONBound() int
}

// EnvelopeSlack is reserved beyond an answer's envelope as measured before
// its items are added: the numbers and flags set afterwards (tokens,
// dropped, truncated, omitted and the seq range) grow it by far less.
const EnvelopeSlack = 256

// AnswerBytes is the byte budget of one answer being built. A nil
// *AnswerBytes has no limit (the pure functions' table tests).
//
// Measuring every item with encoding/json would cost a marshal per message
// on every window, so an item is first taken on an upper bound of its JSON
// (JSONBound: every byte of text escapes to at most 6); only when the
// bounds of what was taken would pass the room left are those items
// measured exactly, once, and the rest of the answer counted exactly.
// The room left never goes below what was taken, so the cap holds.
type AnswerBytes struct {
	left    int          // room left after the measured items
	pending []func() int // exact sizes of the items taken on their bound
	bound   int          // sum of the pending items' bounds
}

// NewAnswerBytes starts the budget of an answer of at most capBytes whose
// envelope (the answer without its items) is envelope; capBytes <= 0 means
// no limit.
func NewAnswerBytes(capBytes int, envelope any) *AnswerBytes {
	if capBytes <= 0 {
		return nil
	}
	return &AnswerBytes{left: capBytes - JSONSize(envelope) - EnvelopeSlack}
}

// Take reserves the JSON of item as an element of a list (with the comma
// before it) when it fits; false leaves the budget as it was.
func (b *AnswerBytes) Take(item any) bool {
	return b.add(JSONBound(item)+1, func() int { return JSONSize(item) + 1 })
}

// TakeText reserves text as part of a JSON string, and ids as elements of
// a list, together: all fit or none is taken.
func (b *AnswerBytes) TakeText(text string, ids ...string) bool {
	bound := TextBound(text)
	for _, id := range ids {
		bound += TextBound(id) + 3
	}
	return b.add(bound, func() int {
		n := JSONTextBytes(text)
		for _, id := range ids {
			n += JSONSize(id) + 1
		}
		return n
	})
}

// add takes an item of at most bound bytes, exactly exact() bytes.
func (b *AnswerBytes) add(bound int, exact func() int) bool {
	if b == nil {
		return true
	}
	if b.bound+bound <= b.left {
		b.pending = append(b.pending, exact)
		b.bound += bound
		return true
	}
	b.Settle()
	n := exact()
	if n > b.left {
		return false
	}
	b.left -= n
	return true
}

// Settle measures the items taken on their bound.
func (b *AnswerBytes) Settle() {
	for _, exact := range b.pending {
		b.left -= exact()
	}
	b.pending, b.bound = b.pending[:0], 0
}

// JSONSize is the length of v as encoding/json writes it (the REST
// encoder; HTML characters escaped).
func JSONSize(v any) int {
	js, err := json.Marshal(v)
	if err != nil {
		return Unbounded // never fits
	}
	return len(js)
}

// JSONTextBytes is what s adds to a JSON string it is part of: its
// escaped length without the quotes (escaping is per character, so the
// parts of a text add up to the whole).
func JSONTextBytes(s string) int { return JSONSize(s) - 2 }

// TextBound bounds JSONTextBytes(s): encoding/json writes a byte as at
// most 6 (\u00XX for a control character or an HTML one, \ufffd for a
// byte of invalid UTF-8; U+2028 and U+2029 take 6 for 3).
func TextBound(s string) int { return 6 * len(s) }

// ListFixedBound bounds the fixed parts of a list item (or a search hit
// around its memory): its keys, up to five numbers and four timestamps.
const ListFixedBound = 256

// JSONBound is an upper bound of JSONSize(v) that reads only lengths;
// v's exact size (Unbounded, never taken on a bound) for other types.
func JSONBound(v any) int {
	switch x := v.(type) {
	case Bounded:
		return x.JSONBound()
	case string:
		return TextBound(x) + 2
	}
	return Unbounded
}
