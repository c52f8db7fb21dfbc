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
func (s *Store) MaxResponseBytes() int { return s.core.MaxBytes }

// answerCap is the cap of one answer: the store's, or a smaller one a
// caller asks for (the MCP tools, whose results carry the answer twice).
func (s *reader) answerCap(asked int) int { return s.core.AnswerCap(asked) }

func memoryBound(m *Memory) int { return m.JSONBound() }

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x SearchHit) JSONBound() int {
	return core.ListFixedBound + memoryBound(&x.Memory)
}

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x OwnerSummary) JSONBound() int {
	return core.ListFixedBound + core.TextBound(x.Owner)
}
