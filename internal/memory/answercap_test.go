package memory

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
)

// nastyText is text whose JSON is as large as text gets: control
// characters, HTML characters, U+2028, invalid UTF-8, quotes, backslashes,
// and ordinary letters between them.
func nastyText(r *rand.Rand, n int) string {
	parts := []string{"\x01", "<", ">", "&", "\u2028", "\xff", "\"", "\\", "a", "é", "猫", "\n"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// TestJSONBoundsHold: the bounds an answer takes items on are upper bounds
// of what encoding/json writes, for the worst text and the largest numbers
// and timestamps; and an answer built with them never passes its cap.
func TestJSONBoundsHold(t *testing.T) {
	r := rand.New(rand.NewPCG(26, 1))
	when := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(13*3600+59*60)))
	for i := range 300 {
		n := r.IntN(400)
		m := ConversationMessage{Seq: math.MaxInt64, Role: Role(nastyText(r, 9)), Content: nastyText(r, n),
			ToolName: nastyText(r, 20), ToolCallID: nastyText(r, 20), Tokens: math.MaxInt, CreatedAt: when,
			Flags: []string{nastyText(r, 5), nastyText(r, 7)}, Source: Source(nastyText(r, 6))}
		y := Summary{ID: nastyText(r, 36), Owner: nastyText(r, 30), SessionID: nastyText(r, 30), Depth: math.MinInt,
			Content: nastyText(r, n), ExpandHint: nastyText(r, 40), EarliestSeq: math.MinInt64, LatestSeq: math.MinInt64,
			EarliestAt: when, LatestAt: when, Tokens: math.MinInt, DescendantCount: math.MinInt, Method: nastyText(r, 14), CreatedAt: when}
		h := HistoryHit{Kind: nastyText(r, 7), SessionID: nastyText(r, 30), Seq: math.MinInt64, SummaryID: nastyText(r, 36),
			Source: Source(nastyText(r, 6)), Snippet: nastyText(r, n), Score: -math.SmallestNonzeroFloat64 * 3, CreatedAt: when}
		for _, v := range []any{m, y, h, WindowItem{Kind: KindMessage, Message: &m}, WindowItem{Kind: KindSummary, Summary: &y}, m.Content} {
			if b, n := core.JSONBound(v), core.JSONSize(v); b < n {
				t.Fatalf("case %d: bound %d < size %d for %T", i, b, n, v)
			}
		}
		if b, n := core.TextBound(m.Content), core.JSONTextBytes(m.Content); b < n {
			t.Fatalf("case %d: text bound %d < %d", i, b, n)
		}
	}

	// Items taken on their bounds, then measured: the total stays within the cap.
	for _, capBytes := range []int{MinMaxResponseBytes, 100_000, 300_000} {
		page := &MessagePage{Items: []ConversationMessage{}}
		b := core.NewAnswerBytes(capBytes, page)
		for i := 0; ; i++ {
			m := ConversationMessage{Seq: int64(i + 1), Role: RoleAssistant, Content: nastyText(r, r.IntN(3000)), CreatedAt: when}
			if !b.Take(m) {
				break
			}
			page.Items = append(page.Items, m)
		}
		page.Omit(1, 1<<40)
		if n := core.JSONSize(page); n > capBytes || len(page.Items) == 0 {
			t.Errorf("cap %d: a page of %d messages is %d bytes", capBytes, len(page.Items), n)
		}
	}
}
