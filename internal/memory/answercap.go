package memory

import (
	"encoding/json"
	"fmt"
	"math"
)

// Every answer that carries conversation text — a window, a message list,
// an expansion, a history search, a context — is bounded twice: by its own
// budget (tokens, rows) and by a hard byte cap per runtime (Config.
// MaxResponseBytes, the MemoryRuntime's spec.service.limits.
// maxResponseBytes). The cap is enforced while the answer is built: the
// JSON size of each item is counted as it is added, and the first item
// that would pass the cap is left out with everything after it, the answer
// saying so (Truncation). Nothing is cut after encoding, so an answer is
// always whole JSON of whole items.

// Bounds and default of the byte cap of one answer.
const (
	DefaultMaxResponseBytes = 1 << 20
	MinMaxResponseBytes     = 64 << 10
	MaxMaxResponseBytes     = 64 << 20
)

// envelopeSlack is reserved beyond an answer's envelope as measured before
// its items are added: the numbers and flags set afterwards (tokens,
// dropped, truncated, omitted and the seq range) grow it by far less.
const envelopeSlack = 256

// ValidMaxResponseBytes checks a configured cap (0 = the default).
func ValidMaxResponseBytes(n int) error {
	if n != 0 && (n < MinMaxResponseBytes || n > MaxMaxResponseBytes) {
		return fmt.Errorf("maxResponseBytes: %d must be within %d..%d (0 = %d)", n, MinMaxResponseBytes, MaxMaxResponseBytes, DefaultMaxResponseBytes)
	}
	return nil
}

// MaxResponseBytes is the byte cap of this store's answers.
func (s *Store) MaxResponseBytes() int { return s.maxBytes }

// answerCap is the cap of one answer: the store's, or a smaller one a
// caller asks for (the MCP tools, whose results carry the answer twice).
func (s *Store) answerCap(asked int) int {
	if asked <= 0 || asked > s.maxBytes {
		return s.maxBytes
	}
	return asked
}

// answerBytes is the byte budget of one answer being built. A nil
// *answerBytes has no limit (the pure functions' table tests).
type answerBytes struct{ left int }

// newAnswerBytes starts the budget of an answer of at most capBytes whose
// envelope (the answer without its items) is envelope; capBytes <= 0 means
// no limit.
func newAnswerBytes(capBytes int, envelope any) *answerBytes {
	if capBytes <= 0 {
		return nil
	}
	return &answerBytes{left: capBytes - jsonSize(envelope) - envelopeSlack}
}

// take reserves the JSON size of item, plus the comma before it, when it
// fits; false leaves the budget as it was.
func (b *answerBytes) take(item any) bool { return b.takeN(jsonSize(item) + 1) }

// takeN reserves n bytes when they fit.
func (b *answerBytes) takeN(n int) bool {
	if b == nil {
		return true
	}
	if n > b.left {
		return false
	}
	b.left -= n
	return true
}

// jsonSize is the length of v as encoding/json writes it (the REST
// encoder; HTML characters escaped).
func jsonSize(v any) int {
	js, err := json.Marshal(v)
	if err != nil {
		return math.MaxInt / 2 // never fits
	}
	return len(js)
}

// jsonTextBytes is what s adds to a JSON string it is part of: its
// escaped length without the quotes (escaping is per character, so the
// parts of a text add up to the whole).
func jsonTextBytes(s string) int { return jsonSize(s) - 2 }
