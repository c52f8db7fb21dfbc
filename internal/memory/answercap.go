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
func (s *reader) answerCap(asked int) int {
	if asked <= 0 || asked > s.maxBytes {
		return s.maxBytes
	}
	return asked
}

// answerBytes is the byte budget of one answer being built. A nil
// *answerBytes has no limit (the pure functions' table tests).
//
// Measuring every item with encoding/json would cost a marshal per message
// on every window, so an item is first taken on an upper bound of its JSON
// (jsonBound: every byte of text escapes to at most 6); only when the
// bounds of what was taken would pass the room left are those items
// measured exactly, once, and the rest of the answer counted exactly.
// The room left never goes below what was taken, so the cap holds.
type answerBytes struct {
	left    int          // room left after the measured items
	pending []func() int // exact sizes of the items taken on their bound
	bound   int          // sum of the pending items' bounds
}

// newAnswerBytes starts the budget of an answer of at most capBytes whose
// envelope (the answer without its items) is envelope; capBytes <= 0 means
// no limit.
func newAnswerBytes(capBytes int, envelope any) *answerBytes {
	if capBytes <= 0 {
		return nil
	}
	return &answerBytes{left: capBytes - jsonSize(envelope) - envelopeSlack}
}

// take reserves the JSON of item as an element of a list (with the comma
// before it) when it fits; false leaves the budget as it was.
func (b *answerBytes) take(item any) bool {
	return b.add(jsonBound(item)+1, func() int { return jsonSize(item) + 1 })
}

// takeText reserves text as part of a JSON string, and ids as elements of
// a list, together: all fit or none is taken.
func (b *answerBytes) takeText(text string, ids ...string) bool {
	bound := textBound(text)
	for _, id := range ids {
		bound += textBound(id) + 3
	}
	return b.add(bound, func() int {
		n := jsonTextBytes(text)
		for _, id := range ids {
			n += jsonSize(id) + 1
		}
		return n
	})
}

// add takes an item of at most bound bytes, exactly exact() bytes.
func (b *answerBytes) add(bound int, exact func() int) bool {
	if b == nil {
		return true
	}
	if b.bound+bound <= b.left {
		b.pending = append(b.pending, exact)
		b.bound += bound
		return true
	}
	b.settle()
	n := exact()
	if n > b.left {
		return false
	}
	b.left -= n
	return true
}

// settle measures the items taken on their bound.
func (b *answerBytes) settle() {
	for _, exact := range b.pending {
		b.left -= exact()
	}
	b.pending, b.bound = b.pending[:0], 0
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

// textBound bounds jsonTextBytes(s): encoding/json writes a byte as at
// most 6 (\u00XX for a control character or an HTML one, \ufffd for a
// byte of invalid UTF-8; U+2028 and U+2029 take 6 for 3).
func textBound(s string) int { return 6 * len(s) }

// Bounds of the JSON of the fixed parts of the items (keys, punctuation,
// numbers of up to 20 digits, timestamps of up to 37 bytes), with room to
// spare; TestJSONBoundsHold checks them against encoding/json.
const (
	messageFixedBound = 256
	summaryFixedBound = 512
	hitFixedBound     = 256
	itemFixedBound    = 64 // a WindowItem around its message or summary
)

// jsonBound is an upper bound of jsonSize(v) that reads only lengths;
// v's exact size (math.MaxInt/2, never taken on a bound) for other types.
func jsonBound(v any) int {
	switch x := v.(type) {
	case ConversationMessage:
		return messageBound(&x)
	case WindowItem:
		if x.Message != nil {
			return itemFixedBound + messageBound(x.Message)
		}
		if x.Summary != nil {
			return itemFixedBound + summaryBound(x.Summary)
		}
	case HistoryHit:
		return hitFixedBound + textBound(x.Kind) + textBound(x.SessionID) + textBound(x.SummaryID) +
			textBound(string(x.Source)) + textBound(x.Snippet)
	case string:
		return textBound(x) + 2
	case Memory:
		return memoryBound(&x)
	case SearchHit:
		return listFixedBound + memoryBound(&x.Memory)
	case ChangelogEntry:
		return listFixedBound + textBound(x.Owner) + textBound(x.Agent) + textBound(string(x.Kind)) +
			textBound(string(x.Source)) + textBound(x.ActorID) + textBound(x.Before) + textBound(x.After)
	case Session:
		return 2*listFixedBound + textBound(x.ID) + textBound(x.Owner) + textBound(x.Agent) + textBound(x.Title)
	case OwnerSummary:
		return listFixedBound + textBound(x.Owner)
	case EpisodeHit:
		e := &x.Episode
		return 2*listFixedBound + textBound(e.ID) + textBound(e.Owner) + textBound(e.SessionID) + textBound(e.Agent) +
			textBound(e.Summary) + textBound(e.Method)
	}
	return math.MaxInt / 2
}

// listFixedBound bounds the fixed parts of a list item (or a search hit
// around its memory): its keys, up to five numbers and four timestamps.
const listFixedBound = 256

func memoryBound(m *Memory) int {
	n := 2*listFixedBound + textBound(m.ID) + textBound(m.Owner) + textBound(m.Agent) + textBound(m.Session) +
		textBound(m.SourceSession) + textBound(string(m.Source)) + textBound(m.Category) + textBound(m.Content) +
		textBound(m.SupersededBy)
	for _, f := range m.Flags {
		n += textBound(f) + 3
	}
	return n
}

func messageBound(m *ConversationMessage) int {
	n := messageFixedBound + textBound(string(m.Role)) + textBound(m.Content) + textBound(m.ToolName) +
		textBound(m.ToolCallID) + textBound(string(m.Source))
	for _, f := range m.Flags {
		n += textBound(f) + 3
	}
	return n
}

func summaryBound(y *Summary) int {
	return summaryFixedBound + textBound(y.ID) + textBound(y.Owner) + textBound(y.SessionID) + textBound(y.Content) +
		textBound(y.ExpandHint) + textBound(y.Method)
}
