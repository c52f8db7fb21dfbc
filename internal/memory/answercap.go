package memory

import (
	"fmt"

	"github.com/engram-dev/engram/internal/memory/core"
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

// Bounds of the JSON of the fixed parts of the items (keys, punctuation,
// numbers of up to 20 digits, timestamps of up to 37 bytes), with room to
// spare; TestJSONBoundsHold checks them against encoding/json.
const (
	messageFixedBound = 256
	summaryFixedBound = 512
	hitFixedBound     = 256
	itemFixedBound    = 64 // a WindowItem around its message or summary
)

// listFixedBound bounds the fixed parts of a list item (or a search hit
// around its memory): its keys, up to five numbers and four timestamps.
const listFixedBound = 256

func memoryBound(m *Memory) int {
	n := 2*listFixedBound + core.TextBound(m.ID) + core.TextBound(m.Owner) + core.TextBound(m.Agent) + core.TextBound(m.Session) +
		core.TextBound(m.SourceSession) + core.TextBound(string(m.Source)) + core.TextBound(m.Category) + core.TextBound(m.Content) +
		core.TextBound(m.SupersededBy)
	for _, f := range m.Flags {
		n += core.TextBound(f) + 3
	}
	return n
}

func messageBound(m *ConversationMessage) int {
	n := messageFixedBound + core.TextBound(string(m.Role)) + core.TextBound(m.Content) + core.TextBound(m.ToolName) +
		core.TextBound(m.ToolCallID) + core.TextBound(string(m.Source))
	for _, f := range m.Flags {
		n += core.TextBound(f) + 3
	}
	return n
}

func summaryBound(y *Summary) int {
	return summaryFixedBound + core.TextBound(y.ID) + core.TextBound(y.Owner) + core.TextBound(y.SessionID) + core.TextBound(y.Content) +
		core.TextBound(y.ExpandHint) + core.TextBound(y.Method)
}

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x ConversationMessage) JSONBound() int {
	return messageBound(&x)
}

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x WindowItem) JSONBound() int {
	if x.Message != nil {
		return itemFixedBound + messageBound(x.Message)
	}
	if x.Summary != nil {
		return itemFixedBound + summaryBound(x.Summary)
	}
	return core.Unbounded
}

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x HistoryHit) JSONBound() int {
	return hitFixedBound + core.TextBound(x.Kind) + core.TextBound(x.SessionID) + core.TextBound(x.SummaryID) +
		core.TextBound(string(x.Source)) + core.TextBound(x.Snippet)
}

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x Memory) JSONBound() int {
	return memoryBound(&x)
}

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x SearchHit) JSONBound() int {
	return listFixedBound + memoryBound(&x.Memory)
}

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x ChangelogEntry) JSONBound() int {
	return listFixedBound + core.TextBound(x.Owner) + core.TextBound(x.Agent) + core.TextBound(string(x.Kind)) +
		core.TextBound(string(x.Source)) + core.TextBound(x.ActorID) + core.TextBound(x.Before) + core.TextBound(x.After)
}

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x Session) JSONBound() int {
	return 2*listFixedBound + core.TextBound(x.ID) + core.TextBound(x.Owner) + core.TextBound(x.Agent) + core.TextBound(x.Title)
}

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x OwnerSummary) JSONBound() int {
	return listFixedBound + core.TextBound(x.Owner)
}

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x EpisodeHit) JSONBound() int {
	e := &x.Episode
	return 2*listFixedBound + core.TextBound(e.ID) + core.TextBound(e.Owner) + core.TextBound(e.SessionID) + core.TextBound(e.Agent) +
		core.TextBound(e.Summary) + core.TextBound(e.Method)
}
