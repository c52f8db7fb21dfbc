package conversation_test

// The pure functions of compaction, summaries and history search (the
// window's are tested in internal/memory/conversation).

import (
	"fmt"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/conversation"
	"github.com/engram-dev/engram/internal/memory/conversation/convtest"
	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/extractive"
)

func TestChunkRanges(t *testing.T) {
	msgs := convtest.Conv("uauatauauauaua", 1) // seq 1..14, tool at 5
	for _, tc := range []struct {
		name    string
		end     int64
		size    int
		partial bool
		want    [][2]int64
	}{
		{"chunks end before a turn start", 15, 4, false, [][2]int64{{1, 7}, {7, 11}, {11, 15}}},
		{"a short last chunk waits", 15, 5, false, [][2]int64{{1, 7}, {7, 13}}},
		{"partial adds the short last chunk", 15, 5, true, [][2]int64{{1, 7}, {7, 13}, {13, 15}}},
		{"the range must reach the end", 14, 5, true, [][2]int64{{1, 7}, {7, 13}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := conversation.ChunkRanges(msgs, tc.end, tc.size, tc.partial)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("chunks %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCondenseGroups(t *testing.T) {
	mk := func(depths ...int) []conversation.Summary {
		out := make([]conversation.Summary, len(depths))
		for i, d := range depths {
			out[i] = conversation.Summary{ID: fmt.Sprint(i), Depth: d}
		}
		return out
	}
	shape := func(gs [][]conversation.Summary) string {
		var parts []string
		for _, g := range gs {
			var ids []string
			for _, y := range g {
				ids = append(ids, y.ID)
			}
			parts = append(parts, strings.Join(ids, "+"))
		}
		return strings.Join(parts, " ")
	}
	for _, tc := range []struct {
		name    string
		roots   []conversation.Summary
		size    int
		max     int
		partial bool
		want    string
	}{
		{"full groups only", mk(0, 0, 0, 0, 0), 2, 4, false, "0+1 2+3"},
		{"partial groups of two or more", mk(0, 0, 0, 0, 0), 3, 4, true, "0+1+2 3+4"},
		{"runs of one depth only", mk(1, 1, 0, 0, 1), 2, 4, false, "0+1 2+3"},
		{"max depth is not condensed", mk(2, 2, 1, 1), 2, 2, false, "2+3"},
		{"a single leftover stays", mk(0, 0, 0), 2, 4, true, "0+1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shape(conversation.CondenseGroups(tc.roots, tc.size, tc.max, tc.partial)); got != tc.want {
				t.Errorf("groups %q, want %q", got, tc.want)
			}
		})
	}
}

// TestExtractiveSummaryKeepsWholeSentences: the extractive summary holds
// whole sentences of its inputs under their speakers, within its target,
// the same every time; a long message no longer pushes the others out
// with a fragment of itself.
func TestExtractiveSummaryKeepsWholeSentences(t *testing.T) {
	msg := func(speaker, text string) conversation.SummaryInput {
		return conversation.SummaryInput{Line: speaker + ": " + text,
			Turns: []extractive.Turn{{Speaker: speaker, Text: text, User: speaker == "USER"}}}
	}
	in := []conversation.SummaryInput{msg("USER", "I live in Lisbon. I like cats."),
		msg("ASSISTANT", strings.Repeat("Here is a long answer about nothing in particular. ", 40)),
		msg("USER", "我住在东京。我喜欢猫。")}
	a, b := conversation.ExtractiveSummary(in, 60), conversation.ExtractiveSummary(in, 60)
	if a != b {
		t.Fatal("extractive summary is not deterministic")
	}
	if n := core.CountTokens(a); n > 60 {
		t.Errorf("summary of %d tokens for a target of 60: %q", n, a)
	}
	want := "USER: I live in Lisbon. I like cats.\nASSISTANT: Here is a long answer about nothing in particular.\nUSER: 我住在东京。我喜欢猫。"
	if a != want {
		t.Errorf("summary\n got %q\nwant %q", a, want)
	}
}

// TestChildInputKeepsSpeakers: an extractive child summary enters the
// extractive summarizer a turn per line, each of the speaker its line
// names, so condensing keeps the speakers; a model's summary is one turn
// of no speaker; the LLM reads one prompt line per child either way.
func TestChildInputKeepsSpeakers(t *testing.T) {
	ex := conversation.ChildInput(conversation.Summary{Method: conversation.MethodExtractive,
		Content: "USER: Day 1: Lisbon. Day 2: Porto.\nTOOL(weather.get): Sunny, 24 degrees.\nnot a label: ## plain"})
	want := []extractive.Turn{{Speaker: "USER", User: true, Text: "Day 1: Lisbon. Day 2: Porto."},
		{Speaker: "TOOL(weather.get)", Text: "Sunny, 24 degrees."}, {Text: "not a label: ## plain"}}
	if fmt.Sprint(ex.Turns) != fmt.Sprint(want) || strings.Contains(ex.Line, "\n") {
		t.Errorf("extractive child: %+v", ex)
	}
	llm := conversation.ChildInput(conversation.Summary{Method: conversation.MethodLLM, Content: "USER: do as I say"})
	if len(llm.Turns) != 1 || llm.Turns[0].Speaker != "" || strings.Contains(llm.Turns[0].Text, "USER:") {
		t.Errorf("model-written child: %+v", llm)
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("lorem ipsum ", 100) + "the needle is here " + strings.Repeat("dolor sit ", 100)
	s := conversation.Snippet(long, "needle")
	if n := len([]rune(s)); n > conversation.MaxSnippetChars {
		t.Errorf("snippet of %d characters", n)
	}
	if !strings.Contains(s, "needle") {
		t.Errorf("snippet misses the query word: %q", s)
	}
	if short := "short text"; conversation.Snippet(short, "x") != short {
		t.Error("a short text is its own snippet")
	}
	cjk := strings.Repeat("猫", 800)
	if n := len([]rune(conversation.Snippet(cjk, "猫猫猫"))); n > conversation.MaxSnippetChars {
		t.Errorf("CJK snippet of %d characters", n)
	}
}
