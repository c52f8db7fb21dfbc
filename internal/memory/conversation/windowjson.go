package conversation

import (
	"slices"
	"strconv"

	"github.com/engram-dev/engram/internal/memory/core"
)

// AppendJSON appends the window as encoding/json's Marshal writes it, byte
// for byte (field order, omitempty, HTML escaping, the embedded
// Truncation's fields in its place), without reflection: a token window
// of a long session answers with ~100 messages, each with a time.Time that
// Marshal writes through its MarshalJSON and then validates again (issue
// 32). false: a value Marshal refuses (a year past 9999); the caller then
// marshals the window with encoding/json, which reports the error.
// TestWindowAppendJSONMatchesMarshal compares the two.
func (w *Window) AppendJSON(b []byte) ([]byte, bool) {
	ok := true
	b = slices.Grow(b, w.jsonSize())
	b = core.AppendJSONStringField(b, `{"strategy":`, string(w.Strategy))
	b = core.AppendJSONIntField(b, `,"budget":`, int64(w.Budget))
	b = core.AppendJSONIntField(b, `,"tokens":`, int64(w.Tokens))
	b = append(b, `,"items":`...)
	b = core.AppendJSONArray(b, w.Items, func(b []byte, it *WindowItem) []byte { return it.appendJSON(b, &ok) })
	b = append(b, `,"freshTailOverBudget":`...)
	b = strconv.AppendBool(b, w.FreshTailOverBudget)
	b = core.AppendJSONIntField(b, `,"dropped":`, int64(w.Dropped))
	b = w.appendJSONFields(b) // the embedded Truncation's fields
	return append(b, '}'), ok
}

// jsonSize is about the length of the window's JSON (a little over when
// nothing is escaped), so that it is written into one buffer: grown by
// append from a few KiB, the buffer of a 100-message window was
// allocated four times, three times the bytes encoding/json allocates.
func (w *Window) jsonSize() int {
	n := 256
	for i := range w.Items {
		if m := w.Items[i].Message; m != nil {
			n += 192 + len(m.Content) + len(m.ToolName) + len(m.ToolCallID)
			for _, f := range m.Flags {
				n += 4 + len(f)
			}
		}
		if s := w.Items[i].Summary; s != nil {
			n += 384 + len(s.ID) + len(s.Owner) + len(s.SessionID) + len(s.Content) + len(s.ExpandHint)
		}
	}
	return n
}

// appendJSONFields appends the Truncation's fields as they stand in the
// object that embeds it.
func (t *Truncation) appendJSONFields(b []byte) []byte {
	b = append(b, `,"truncated":`...)
	b = strconv.AppendBool(b, t.Truncated)
	for _, f := range [...]struct {
		name string
		v    int64
	}{{`,"omitted":`, int64(t.Omitted)}, {`,"omittedFrom":`, t.OmittedFrom}, {`,"omittedTo":`, t.OmittedTo}} {
		if f.v != 0 {
			b = strconv.AppendInt(append(b, f.name...), f.v, 10)
		}
	}
	return b
}

func (it *WindowItem) appendJSON(b []byte, ok *bool) []byte {
	b = core.AppendJSONStringField(b, `{"kind":`, it.Kind)
	if it.Message != nil {
		b = it.Message.appendJSON(append(b, `,"message":`...), ok)
	}
	if it.Summary != nil {
		b = it.Summary.appendJSON(append(b, `,"summary":`...), ok)
	}
	return append(b, '}')
}

func (m *Message) appendJSON(b []byte, ok *bool) []byte {
	b = core.AppendJSONIntField(b, `{"seq":`, m.Seq)
	b = core.AppendJSONStringField(b, `,"role":`, string(m.Role))
	b = core.AppendJSONStringField(b, `,"content":`, m.Content)
	b = core.AppendJSONOptString(b, `,"toolName":`, m.ToolName)
	b = core.AppendJSONOptString(b, `,"toolCallId":`, m.ToolCallID)
	b = core.AppendJSONIntField(b, `,"tokens":`, int64(m.Tokens))
	b = core.AppendJSONTimeField(b, `,"createdAt":`, m.CreatedAt, ok)
	b = core.AppendJSONOptStrings(b, `,"flags":`, m.Flags)
	b = core.AppendJSONStringField(b, `,"source":`, string(m.Source))
	return append(b, '}')
}

func (s *Summary) appendJSON(b []byte, ok *bool) []byte {
	b = core.AppendJSONStringField(b, `{"id":`, s.ID)
	b = core.AppendJSONStringField(b, `,"owner":`, s.Owner)
	b = core.AppendJSONStringField(b, `,"sessionId":`, s.SessionID)
	b = core.AppendJSONIntField(b, `,"depth":`, int64(s.Depth))
	b = core.AppendJSONStringField(b, `,"content":`, s.Content)
	b = core.AppendJSONOptString(b, `,"expandHint":`, s.ExpandHint)
	b = core.AppendJSONIntField(b, `,"earliestSeq":`, s.EarliestSeq)
	b = core.AppendJSONIntField(b, `,"latestSeq":`, s.LatestSeq)
	b = core.AppendJSONTimeField(b, `,"earliestAt":`, s.EarliestAt, ok)
	b = core.AppendJSONTimeField(b, `,"latestAt":`, s.LatestAt, ok)
	b = core.AppendJSONIntField(b, `,"tokens":`, int64(s.Tokens))
	b = core.AppendJSONIntField(b, `,"descendantCount":`, int64(s.DescendantCount))
	b = core.AppendJSONStringField(b, `,"method":`, s.Method)
	b = core.AppendJSONTimeField(b, `,"createdAt":`, s.CreatedAt, ok)
	return append(b, '}')
}
