package conversation

import "github.com/engram-dev/engram/internal/memory/core"

// The bounds of the JSON of conversation items, for the byte cap of an
// answer (core.AnswerBytes, core.Bounded).

// Bounds of the JSON of the fixed parts of the items (keys, punctuation,
// numbers of up to 20 digits, timestamps of up to 37 bytes), with room to
// spare; memory's TestJSONBoundsHold checks them against encoding/json.
const (
	messageFixedBound = 256
	summaryFixedBound = 512
	hitFixedBound     = 256
	itemFixedBound    = 64 // a WindowItem around its message or summary
)

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x Message) JSONBound() int {
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
func (x Session) JSONBound() int {
	return 2*core.ListFixedBound + core.TextBound(x.ID) + core.TextBound(x.Owner) + core.TextBound(x.Agent) + core.TextBound(x.Title)
}

func messageBound(m *Message) int {
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
