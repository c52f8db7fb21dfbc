package memory

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory/conversation"
	"github.com/engram-dev/engram/internal/memory/policy"
)

func randomConvMessage(r *rand.Rand) *conversation.Message {
	opt := func() string {
		if r.IntN(2) == 0 {
			return ""
		}
		return randomJSONString(r)
	}
	return &conversation.Message{Seq: r.Int64() - r.Int64(), Role: conversation.Role(randomJSONString(r)), Content: randomJSONString(r),
		ToolName: opt(), ToolCallID: opt(), Tokens: r.IntN(1000) - 10, CreatedAt: randomTime(r), Flags: randomStrings(r),
		Source: Source(randomJSONString(r))}
}

func randomConvSummary(r *rand.Rand) *conversation.Summary {
	hint := ""
	if r.IntN(2) == 0 {
		hint = randomJSONString(r)
	}
	return &conversation.Summary{ID: randomJSONString(r), Owner: randomJSONString(r), SessionID: randomJSONString(r), Depth: r.IntN(5),
		Content: randomJSONString(r), ExpandHint: hint, EarliestSeq: r.Int64N(1e6), LatestSeq: r.Int64() - r.Int64(),
		EarliestAt: randomTime(r), LatestAt: randomTime(r), Tokens: r.IntN(5000), DescendantCount: r.IntN(50) - 1,
		Method: randomJSONString(r), CreatedAt: randomTime(r)}
}

func randomWindow(r *rand.Rand) *Window {
	w := &Window{Strategy: policy.WindowStrategy(randomJSONString(r)), Budget: r.IntN(1e6) - 5, Tokens: r.IntN(1e5),
		FreshTailOverBudget: r.IntN(2) == 0, Dropped: r.IntN(3) * r.IntN(1000)}
	w.Truncated = r.IntN(2) == 0
	w.Omitted, w.OmittedFrom, w.OmittedTo = r.IntN(2)*r.IntN(100), int64(r.IntN(2))*(r.Int64()-r.Int64()), int64(r.IntN(2)*r.IntN(1e6))
	if r.IntN(8) != 0 {
		w.Items = make([]WindowItem, r.IntN(12))
	}
	for i := range w.Items {
		it := &w.Items[i]
		it.Kind = randomJSONString(r)
		switch r.IntN(4) {
		case 0:
			it.Message = randomConvMessage(r)
		case 1:
			it.Summary = randomConvSummary(r)
		case 2:
			it.Message, it.Summary = randomConvMessage(r), randomConvSummary(r)
		}
	}
	return w
}

// TestWindowAppendJSONMatchesMarshal: the window's own JSON is byte for
// byte what encoding/json writes, on random windows (strings with what
// JSON escapes, times in several zones, omitted and present fields).
func TestWindowAppendJSONMatchesMarshal(t *testing.T) {
	checkMatchesMarshal(t, 11, func(r *rand.Rand) jsonAppender { return randomWindow(r) })
}

// TestWindowAppendJSONRefusesWhatMarshalRefuses: a time encoding/json
// cannot write is reported (false), so writeJSON lets encoding/json
// answer with its error, as before.
func TestWindowAppendJSONRefusesWhatMarshalRefuses(t *testing.T) {
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	checkRefusals(t, map[string]jsonAppender{
		"message":         &Window{Items: []WindowItem{{Kind: "message", Message: &conversation.Message{CreatedAt: far}}}},
		"summary created": &Window{Items: []WindowItem{{Kind: "summary", Summary: &conversation.Summary{CreatedAt: far}}}},
		"summary latest":  &Window{Items: []WindowItem{{Kind: "summary", Summary: &conversation.Summary{LatestAt: far}}}},
	})
}

// TestWindowJSONKnowsEveryField: a field added to the window's types must
// be added to conversation/windowjson.go too (the random test would not
// set it).
func TestWindowJSONKnowsEveryField(t *testing.T) {
	checkFieldCounts(t, "conversation/windowjson.go", map[reflect.Type]int{
		reflect.TypeFor[Window](): 7, reflect.TypeFor[WindowItem](): 3, reflect.TypeFor[conversation.Message](): 9,
		reflect.TypeFor[conversation.Summary](): 14, reflect.TypeFor[conversation.Truncation](): 4,
	})
}

// benchWindow is a token window of the bench's long session: 100 messages
// of ~150 bytes.
func benchWindow() *Window {
	w := &Window{Strategy: policy.WindowToken, Budget: 4000, Tokens: 3980}
	at := time.Date(2026, 11, 28, 9, 0, 0, 123456000, time.UTC)
	for i := range 100 {
		w.Items = append(w.Items, WindowItem{Kind: conversation.KindMessage, Message: &conversation.Message{Seq: int64(9900 + i),
			Role: conversation.RoleUser, Content: "Message 9900: I have a question about billing. Yesterday it stopped working after the update and I could not find the setting again.",
			Tokens: 40, CreatedAt: at, Source: SourceAgent}})
	}
	return w
}

func BenchmarkWindowJSON(b *testing.B) {
	w := benchWindow()
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(w); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := w.AppendJSON(make([]byte, 0, 8<<10)); !ok {
				b.Fatal("not ok")
			}
		}
	})
}
