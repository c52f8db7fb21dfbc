package extractive

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// tokens counts like the service's counter (core.CountTokens, which this
// leaf may not import): a CJK character is 1/1.5 token, any other byte 1/4,
// rounded up.
func tokens(s string) int {
	var bytes, cjk int
	for _, r := range s {
		if isCJK(r) || unicode.Is(unicode.Hangul, r) {
			cjk++
		} else {
			bytes += utf8.RuneLen(r)
		}
	}
	return (3*bytes + 8*cjk + 11) / 12
}

// conv is a generated conversation: its turns and, per turn, the
// sentences it was made of (the oracle the properties check against).
type conv struct {
	turns []Turn
	sents [][]string
}

var (
	fillerWords = strings.Fields(`train station ticket morning evening window seat coffee museum garden river bridge
		walk bus tram hotel room breakfast view street market lunch dinner square tower beach tour guide map`)
	names  = []string{"Lisbon", "Porto", "Ana", "Dr. Silva", "Évora", "Mr. Costa"}
	cjk    = []string{"我住在东京。", "明天去京都！", "猫很可爱吗？", "東京駅で会いましょう。"}
	others = []string{"Я живу в Москве.", "Καλημέρα σε όλους!", "هل تحب الشاي؟", "मैं दिल्ली में रहता हूँ।"}
)

// sentenceOf makes a sentence the splitter must keep whole: words from
// the vocabulary, sometimes a name, a number with a decimal point, an
// abbreviation, or one of another script.
func sentenceOf(r *rand.Rand, fact bool) string {
	if !fact && r.IntN(8) == 0 {
		if r.IntN(2) == 0 {
			return cjk[r.IntN(len(cjk))]
		}
		return others[r.IntN(len(others))]
	}
	n := 4 + r.IntN(10)
	w := make([]string, n)
	for i := range w {
		w[i] = fillerWords[r.IntN(len(fillerWords))]
	}
	if r.IntN(5) == 0 {
		w[r.IntN(n)] = "e.g."
	}
	if fact { // a name inside the sentence, a number elsewhere
		at := 1 + r.IntN(n-1)
		w[at] = names[r.IntN(len(names))]
		w[(at+1+r.IntN(n-1))%n] = fmt.Sprintf("%d.%d", 1+r.IntN(99), r.IntN(10))
	}
	w[0] = strings.ToUpper(w[0][:1]) + w[0][1:]
	return strings.Join(w, " ") + []string{".", "!", "?", "."}[r.IntN(4)]
}

// generate makes a conversation of about turns turns.
func generate(r *rand.Rand, turns int) conv {
	var c conv
	for i := range turns {
		var ss []string
		for range 1 + r.IntN(4) {
			ss = append(ss, sentenceOf(r, false))
		}
		sep := []string{" ", "\n", "  "}[r.IntN(3)]
		speaker := []string{"USER", "ASSISTANT", "TOOL(search)"}[i%3]
		c.turns = append(c.turns, Turn{Speaker: speaker, User: speaker == "USER", Text: strings.Join(ss, sep)})
		c.sents = append(c.sents, ss)
	}
	return c
}

// checkWholeSentences checks that every line of out is the speaker of one
// turn and then sentences of that turn, whole, in source order, joined by
// one space; turns in source order.
func checkWholeSentences(t *testing.T, c conv, out string) {
	t.Helper()
	if out == "" {
		return
	}
	turn := 0
	for _, line := range strings.Split(out, "\n") {
		for ; turn < len(c.turns); turn++ {
			p := prefix(c.turns[turn].Speaker)
			if body, ok := strings.CutPrefix(line, p); ok && joinedOf(body, c.sents[turn]) {
				break
			}
		}
		if turn == len(c.turns) {
			t.Fatalf("line %q is not whole sentences of one turn (in order) of\n%+v", line, c.turns)
		}
		turn++
	}
}

// joinedOf reports whether body is some of sents, in order, joined by " "
// (or nothing, between CJK sentences the source glued).
func joinedOf(body string, sents []string) bool {
	if body == "" {
		return true
	}
	for i, s := range sents {
		rest, ok := strings.CutPrefix(body, s)
		if ok && (rest == "" || strings.HasPrefix(rest, " ") && joinedOf(rest[1:], sents[i+1:]) || joinedOf(rest, sents[i+1:])) {
			return true
		}
	}
	return false
}

// TestSummarizeProperties: over generated conversations (fixed seed) and
// budgets, a summary is whole sentences of the source, verbatim, in
// order, under their turns' speakers; it keeps the budget; the same
// input gives the same summary.
func TestSummarizeProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 2026))
	for i := range 200 {
		c := generate(r, 1+r.IntN(30))
		in := 0
		for _, x := range c.turns {
			in += tokens(prefix(x.Speaker) + x.Text)
		}
		budget := []int{48, max(48, in/3), 20 + r.IntN(400), in}[i%4]
		out := Summarize(c.turns, budget, tokens)
		if n := tokens(out); n > budget {
			t.Fatalf("case %d: %d tokens for a budget of %d: %q", i, n, budget, out)
		}
		checkWholeSentences(t, c, out)
		if again := Summarize(slices.Clone(c.turns), budget, tokens); again != out {
			t.Fatalf("case %d: not deterministic:\n%q\n%q", i, out, again)
		}
		if out == "" && budget >= 48 {
			t.Fatalf("case %d: empty summary of %d tokens in %d", i, in, budget)
		}
	}
}

// TestSummarizeKeepsNamesAndNumbers: a sentence with a name and a number
// among filler sentences is kept whenever the budget holds a few
// sentences.
func TestSummarizeKeepsNamesAndNumbers(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 31))
	for i := range 200 {
		c := generate(r, 4+r.IntN(30))
		k := r.IntN(len(c.turns))
		fact := sentenceOf(r, true)
		c.sents[k] = append(c.sents[k], fact)
		c.turns[k].Text += " " + fact
		budget := 3 * tokens("ASSISTANT: "+fact)
		out := Summarize(c.turns, budget, tokens)
		checkWholeSentences(t, c, out)
		if !strings.Contains(out, fact) {
			t.Fatalf("case %d: the sentence %q is not kept in %d tokens:\n%s", i, fact, budget, out)
		}
	}
}

func TestSummarizeTable(t *testing.T) {
	user := func(s string) Turn { return Turn{Speaker: "USER", User: true, Text: s} }
	asst := func(s string) Turn { return Turn{Speaker: "ASSISTANT", Text: s} }
	for _, tc := range []struct {
		name   string
		turns  []Turn
		budget int
		want   string
	}{
		{"everything fits", []Turn{user("I live in Lisbon. I like cats."), asst("Noted.")}, 100,
			"USER: I live in Lisbon. I like cats.\nASSISTANT: Noted."},
		{"duplicates are dropped", []Turn{user("Book the day train to Porto."), asst("Sure."), user("Book the day train to Porto.")}, 100,
			"USER: Book the day train to Porto.\nASSISTANT: Sure."},
		{"the user's fact over small talk", []Turn{asst("Hello there, how can I help you today?"), user("My flight to Faro leaves on 3 March at 7.15."),
			asst("Great, have a nice day!")}, 20, "USER: My flight to Faro leaves on 3 March at 7.15."},
		{"a long sentence alone is cut at a word", []Turn{user(strings.Repeat("word ", 100) + "end.")}, 10,
			"USER: word word word word word word…"},
		{"CJK is cut between characters", []Turn{user(strings.Repeat("猫", 40) + "。")}, 10, "USER: 猫猫猫猫猫猫猫猫猫猫猫…"},
		{"glued CJK sentences stay glued", []Turn{user("我住在东京。我喜欢猫。"), asst("好的。 明白了。")}, 100, "USER: 我住在东京。我喜欢猫。\nASSISTANT: 好的。 明白了。"},
		{"no speaker", []Turn{{Text: "The user asked for day trains. The assistant agreed."}}, 100, "The user asked for day trains. The assistant agreed."},
		{"nothing to say", []Turn{user(" \n ")}, 100, ""},
		{"no budget", []Turn{user("Hello.")}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.turns, tc.budget, tokens)
			if got != tc.want {
				t.Errorf("summary\n got %q\nwant %q", got, tc.want)
			}
			if n := tokens(got); n > tc.budget {
				t.Errorf("%d tokens for a budget of %d", n, tc.budget)
			}
		})
	}
}

// TestSummarizeIsBounded: a conversation far past MaxSentences is
// summarized from its first MaxSentences sentences, and TextRank compares
// at most MaxRanked of them.
func TestSummarizeIsBounded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var turns []Turn
	for i := range 3 * MaxSentences {
		turns = append(turns, Turn{Speaker: "USER", User: true, Text: fmt.Sprintf("%s number %d.", sentenceOf(r, false), i)})
	}
	sents, _ := collect(turns)
	if len(sents) != MaxSentences {
		t.Fatalf("%d sentences considered, want %d", len(sents), MaxSentences)
	}
	start := time.Now()
	out := Summarize(turns, 600, tokens)
	t.Logf("%d turns summarized in %v", len(turns), time.Since(start))
	if strings.Contains(out, fmt.Sprintf("number %d.", MaxSentences)) {
		t.Errorf("a sentence past the cap was read: %q", out)
	}
	vs := make([]vector, 3*MaxRanked)
	if got := rank(vs, make([]float64, len(vs))); len(got.head) != MaxRanked || len(got.tail) != 2*MaxRanked {
		t.Errorf("ranking of %d sentences: head %d, tail %d", len(vs), len(got.head), len(got.tail))
	}
}

// TestSummarizeArbitraryText: text of any bytes (marks, spaces, scripts,
// invalid UTF-8) neither panics nor passes the budget, and gives the same
// summary twice.
func TestSummarizeArbitraryText(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	alphabet := []string{"a", "Z", "7", " ", "\n", ".", "!", "?", "…", "。", "猫", "é", "\u0301", "\xff", "Dr.", "e.g.", `"`, ")", "3.5", "\t", "؟", "।"}
	for i := range 300 {
		var turns []Turn
		for range 1 + r.IntN(6) {
			var b strings.Builder
			for range r.IntN(200) {
				b.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			turns = append(turns, Turn{Speaker: "USER", User: r.IntN(2) == 0, Text: b.String()})
		}
		budget := r.IntN(80)
		out := Summarize(turns, budget, tokens)
		if n := tokens(out); n > budget {
			t.Fatalf("case %d: %d tokens for a budget of %d: %q", i, n, budget, out)
		}
		if again := Summarize(turns, budget, tokens); again != out {
			t.Fatalf("case %d: not deterministic", i)
		}
	}
}
