package server

import (
	"errors"
	"fmt"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// TestProblemDetailsFromTypedErrors: the problem of an engine error is
// decided by its type (errors.As), never by parsing its text: a conflict
// shows its Detail whole, even when the detail quotes the word
// "conflict: " or the error is wrapped in more context; a rule of its own
// shows the rule, and only a memory.RuleError does, whatever another
// error's text says.
func TestProblemDetailsFromTypedErrors(t *testing.T) {
	conflict := &memory.ConflictError{Detail: `the title "conflict: draft" is taken`}
	rule := &memory.RuleError{Rule: `category "house-rules" is global: only source user or system may write it`}
	for _, c := range []struct {
		name       string
		err        error
		kind       problemKind
		wantDetail string
	}{
		{"conflict", conflict, probConflict, conflict.Detail},
		{"wrapped conflict", fmt.Errorf("appending a turn: %w", conflict), probConflict, conflict.Detail},
		{"rule", rule, probProtected, rule.Rule},
		{"wrapped rule", fmt.Errorf("adding: %w", rule), probProtected, rule.Rule},
		{"text that looks like a rule", fmt.Errorf("only source user may do this: %w", memory.ErrProtected), probProtected, memory.ErrProtected.Error()},
		{"bare conflict", memory.ErrConflict, probConflict, memory.ErrConflict.Error()},
	} {
		p, internal := problemFor(c.err)
		if internal || p.Type != ProblemBase+c.kind.slug || p.Detail != c.wantDetail {
			t.Errorf("%s: problem %s %q (internal %v), want %s %q", c.name, p.Type, p.Detail, internal, c.kind.slug, c.wantDetail)
		}
		if !errors.Is(c.err, memory.ErrConflict) && !errors.Is(c.err, memory.ErrProtected) {
			t.Errorf("%s: not an ErrConflict or ErrProtected", c.name)
		}
	}
}
