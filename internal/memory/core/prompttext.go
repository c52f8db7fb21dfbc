package core

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/engram-dev/engram/internal/memory/textguard"
)

// NewestWithin joins lines, keeping the newest that fit within
// maxChars characters (the oldest kept line may lose its beginning); it reports
// whether anything was left out.
func NewestWithin(lines []string, maxChars int) (string, bool) {
	var kept []string
	left := maxChars
	truncated := false
	for i := len(lines) - 1; i >= 0; i-- {
		n := utf8.RuneCountInString(lines[i]) + 1
		if n <= left {
			kept = append(kept, lines[i])
			left -= n
			continue
		}
		truncated = true
		if left > 4 {
			r := []rune(lines[i])
			kept = append(kept, "..."+string(r[len(r)-(left-4):]))
		}
		break
	}
	slices.Reverse(kept)
	return strings.Join(kept, "\n"), truncated
}

// MaxArbiterTextBytes bounds one memory text an arbiter prompt quotes (the
// EXISTING and the NEW of a single add's arbiter and of each fact of a
// session extraction's batch dedup). The model answers with a decision
// and at most "one concise sentence", so 2 KiB of each text (about 500
// tokens of English) is enough to decide; more is only cost (issue 26,
// twenty-second review: 100 facts each quoting a whole memory of 64 KiB
// made one request of 37.5 MiB). The reranker cuts its documents to the
// same size (modelapi.MaxRerankDocumentBytes).
const MaxArbiterTextBytes = 2 << 10

// ArbiterText is text as an arbiter prompt quotes it: redacted with the
// policy's rules of today (a stored text was redacted under the rules of
// its time), made safe for one line of a prompt (textguard.PromptText),
// and cut to MaxArbiterTextBytes on a rune start.
//
// The whole text is redacted before any cut: a cut first could leave the
// start of a secret that its pattern no longer matches. PromptText runs
// on a start of the redacted text only (arbiterWindow, room for what it
// removes), which is itself a text like any other, so its result is as
// safe; it would otherwise rewrite up to 64 KiB to keep 2 KiB.
func ArbiterText(r *textguard.Redactor, text string) string {
	return TruncateUTF8(textguard.PromptText(TruncateUTF8(r.Redacted(text), arbiterWindow)), MaxArbiterTextBytes)
}

// arbiterWindow is how much of the redacted text ArbiterText neutralizes:
// PromptText drops invisible characters, heading marks and rule lines, so
// it is given more than it keeps.
const arbiterWindow = 4 * MaxArbiterTextBytes
