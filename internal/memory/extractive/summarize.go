package extractive

import (
	"strings"
)

// MaxSentences bounds the sentences one summary considers: the first
// MaxSentences of the turns, in order; the rest are not read. The callers'
// inputs are bounded already (a leaf's chunk of messages, an episode's
// 8,000 characters); this keeps the cost bounded whatever they pass.
const MaxSentences = 5000

// duplicateSimilarity is the cosine similarity of TF-IDF vectors from which
// a sentence repeats one already picked ("Please book the day train to
// Porto!" after "Book the day train to Porto.") and is skipped.
const duplicateSimilarity = 0.8

// groupSpread is how much each sentence a group already has in the summary
// lowers the weight of its others (see Turn.Group).
const groupSpread = 0.5

// Turn is one line of the covered conversation: a message, or a child
// summary when summaries are condensed.
type Turn struct {
	// Speaker prefixes the turn's sentences in the summary ("USER",
	// "ASSISTANT(search)"); empty: no prefix (a model-written summary).
	Speaker string
	// Text is the turn's text, already made safe for a prompt; a newline
	// in it ends a sentence.
	Text string
	// User: the user wrote it; its sentences weigh more.
	User bool
	// Group: turns of one group (the lines of one child summary being
	// condensed) share coverage: each sentence a group has in the summary
	// already makes its other sentences weigh less, so the summary spreads
	// over the groups rather than dwelling on the first.
	Group int
}

// Counter counts the tokens of a text: the service's one token counter.
type Counter func(string) int

// sentence is one sentence of a turn and where it came from.
type sentence struct {
	turn, ord int
	text      string
	glued     bool // follows sentence ord-1 with no space between
}

// Summarize picks whole sentences of turns, best first, until no other
// fits in budget tokens (as count counts them), and writes them in their
// original order: one line per turn that kept any, "Speaker: " then its
// kept sentences joined by a space. A sentence alike to one already picked
// is left out. Only when not even the best sentence fits alone is it cut,
// at a word boundary, with "…" (cutToFit). The result is the same for the
// same turns, budget and counter.
func Summarize(turns []Turn, budget int, count Counter) string {
	sents, fs := collect(turns)
	if len(sents) == 0 || budget <= 0 {
		return ""
	}
	vs := tfidf(fs)
	boosts := make([]float64, len(sents))
	for i, s := range sents {
		boosts[i] = weight(fs[i], turns[s.turn].User)
	}
	r := rank(vs, boosts)
	picked, ok := pick(sents, vs, r, turns, budget, count)
	if !ok {
		best := sents[r.best()]
		return cutToFit(turns[best.turn].Speaker, best.text, budget, count)
	}
	return render(turns, sents, picked)
}

// collect splits the turns into sentences (at most MaxSentences) with
// their features.
func collect(turns []Turn) ([]sentence, []features) {
	var sents []sentence
	var fs []features
	for t, turn := range turns {
		for k, p := range splitPieces(turn.Text) {
			if len(sents) == MaxSentences {
				return sents, fs
			}
			sents = append(sents, sentence{turn: t, ord: k, text: p.text, glued: p.glued})
			fs = append(fs, sentenceFeatures(p.text))
		}
	}
	return sents, fs
}

// picker keeps sentences while they fit the budget. The cost of a
// sentence is counted on its own (plus its turn's prefix the first time
// the turn keeps one, and the space or line break before it): a counter
// that rounds up per call counts a whole at most the sum of its parts, so
// the rendered summary stays in budget.
type picker struct {
	sents  []sentence
	vs     []vector
	turns  []Turn
	budget int
	count  Counter

	picked []bool
	groups map[int]int // kept sentences per group
	opened map[int]bool
	seen   map[string]bool
	kept   []int
	used   int
}

// pick picks from the head by score times novelty (1 - the highest
// similarity to a kept sentence, so a second sentence on what one kept
// already says yields to one that adds something), divided by 1 +
// groupSpread × the sentences its group has kept; then from the tail in
// its order. A near-duplicate of a kept sentence (or the same text) is
// never kept. It reports whether any sentence was kept.
func pick(sents []sentence, vs []vector, r ranking, turns []Turn, budget int, count Counter) ([]bool, bool) {
	p := &picker{sents: sents, vs: vs, turns: turns, budget: budget, count: count,
		picked: make([]bool, len(sents)), groups: map[int]int{}, opened: map[int]bool{}, seen: map[string]bool{}}
	simMax := make([]float64, len(r.head))
	gain := func(j int) float64 {
		return r.score[j] * (1 - simMax[j]) / (1 + groupSpread*float64(p.groups[turns[sents[r.head[j]].turn].Group]))
	}
	open := make([]bool, len(r.head))
	for k := range open {
		open[k] = true
	}
	for {
		k := -1
		for j := range r.head {
			if open[j] && (k < 0 || gain(j) > gain(k)) {
				k = j
			}
		}
		if k < 0 {
			break
		}
		open[k] = false
		if !p.keep(r.head[k]) {
			continue
		}
		for j := range r.head {
			if open[j] {
				simMax[j] = max(simMax[j], cosine(vs[r.head[k]], vs[r.head[j]]))
			}
		}
	}
	for _, i := range r.tail {
		p.keep(i)
	}
	return p.picked, len(p.kept) > 0
}

// keep keeps sentence i unless it repeats a kept one or does not fit.
func (p *picker) keep(i int) bool {
	s := p.sents[i]
	key := strings.ToLower(s.text)
	if p.seen[key] || nearDuplicate(p.vs, p.kept, i) {
		return false
	}
	cost := p.count(s.text)
	if len(p.kept) > 0 {
		cost++ // the space or line break before it
	}
	if !p.opened[s.turn] {
		cost += p.count(prefix(p.turns[s.turn].Speaker))
	}
	if p.used+cost > p.budget {
		return false
	}
	p.used += cost
	p.picked[i], p.opened[s.turn], p.seen[key] = true, true, true
	p.groups[p.turns[s.turn].Group]++
	p.kept = append(p.kept, i)
	return true
}

// nearDuplicate reports whether sentence i is much like a kept one.
func nearDuplicate(vs []vector, kept []int, i int) bool {
	for _, k := range kept {
		if cosine(vs[k], vs[i]) >= duplicateSimilarity {
			return true
		}
	}
	return false
}

// prefix is what starts a turn's line in the summary.
func prefix(speaker string) string {
	if speaker == "" {
		return ""
	}
	return speaker + ": "
}

// render writes the picked sentences in source order, a line per turn,
// joined by a space (none between two that the source glued together,
// as CJK text writes them).
func render(turns []Turn, sents []sentence, picked []bool) string {
	var b strings.Builder
	last := -1
	for i, s := range sents {
		if !picked[i] {
			continue
		}
		switch {
		case s.turn != last && b.Len() > 0:
			b.WriteByte('\n')
			fallthrough
		case s.turn != last:
			b.WriteString(prefix(turns[s.turn].Speaker))
		case !(s.glued && picked[i-1]):
			b.WriteByte(' ')
		}
		b.WriteString(s.text)
		last = s.turn
	}
	return b.String()
}
