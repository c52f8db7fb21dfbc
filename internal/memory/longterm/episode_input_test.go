package longterm

import (
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/conversation"
	"github.com/engram-dev/engram/internal/memory/extractive"
)

// TestEpisodeInputIsWholeMessages: an episode is made from the newest
// messages that fit, each whole (the summarizers never get a message cut
// mid-word); a newest message longer than the bound alone is still read
// whole by the extractive summarizer, only its LLM line is cut.
func TestEpisodeInputIsWholeMessages(t *testing.T) {
	msg := func(s string) conversation.SummaryInput {
		return conversation.SummaryInput{Line: "USER: " + s, Turns: []extractive.Turn{{Speaker: "USER", Text: s, User: true}}}
	}
	in := []conversation.SummaryInput{msg("The oldest message, far too long to fit."), msg("Second."), msg("Third one.")}
	got := newestWithin(in, 40)
	if len(got) != 2 || got[0].Line != "USER: Second." || got[1].Line != "USER: Third one." {
		t.Errorf("newest whole messages within 40 characters: %+v", got)
	}
	long := msg(strings.Repeat("A sentence of the one long message. ", 10))
	got = newestWithin([]conversation.SummaryInput{msg("Older."), long}, 100)
	if len(got) != 1 || got[0].Turns[0].Text != long.Turns[0].Text || len([]rune(got[0].Line)) > 100 {
		t.Errorf("an over-long newest message: %+v", got)
	}
	if got := newestWithin(nil, 100); len(got) != 0 {
		t.Errorf("no messages: %+v", got)
	}
}
