package core

import (
	"github.com/engram-dev/engram/internal/memory/policy"
	"github.com/engram-dev/engram/internal/memory/textguard"
)

// Cleaned is input text made ready to store.
type Cleaned struct {
	Text       string // redacted; otherwise exactly what was sent
	Redactions []string
	Flags      []string
}

// CleanWithin turns validated input text into what is stored, the stored
// size bounded by maxStored: secrets redacted first, so the bound measures
// the stored text and the guard judges what a model will later read; then
// the size check; then the policy's injection guard. The stored text keeps
// the characters the caller sent (full-width letters, zero-width joiners
// of emoji sequences): the guard matches a normalized copy only, since
// NFKC would also rewrite legitimate text (CJK punctuation, ligatures,
// superscripts). Memories and conversation messages are cleaned alike.
func (s *State) CleanWithin(field, raw string, maxStored int, fe *FieldErrors) (Cleaned, error) {
	var c Cleaned
	c.Text, c.Redactions = s.Redactor.Redact(raw)
	fe.StoredSize(field, raw, c.Text, maxStored)
	if err := fe.Err(); err != nil {
		return Cleaned{}, err
	}
	mode := s.Policy.Redaction.InjectionGuard
	if mode == policy.GuardOff {
		return c, nil
	}
	reason := textguard.DetectInjection(c.Text)
	switch {
	case reason == "":
	case mode == policy.GuardReject:
		fe.Add(field, "rejected by the injection guard: looks like a prompt injection (%s)", reason)
		return Cleaned{}, fe.Err()
	default:
		c.Flags = []string{textguard.FlagInjection}
	}
	return c, nil
}
