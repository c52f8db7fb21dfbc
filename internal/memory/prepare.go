package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/textguard"
)

// Preparing a write, before any transaction: validation, redaction, the
// injection guard, the stored size, and the embedding.

// prepareAll validates a batch; protected-category violations become field
// errors too, so the caller gets every problem at once.
func (s *writer) prepareAll(reqs []AddRequest) ([]*preparedAdd, error) {
	all := &core.FieldErrors{}
	prepared := make([]*preparedAdd, len(reqs))
	for i, r := range reqs {
		fe := &core.FieldErrors{Prefix: fmt.Sprintf("items[%d].", i)}
		p, err := s.prepareAdd(r, fe)
		if errors.Is(err, ErrProtected) {
			fe.Add("category", "%v", err)
		} else if err != nil && fe.Len() == 0 {
			return nil, err
		}
		all.Append(fe)
		prepared[i] = p
	}
	if err := all.Err(); err != nil {
		return nil, err
	}
	return prepared, nil
}

// prepareAdd validates req, redacts secrets, checks the stored size and
// applies the injection guard.
func (s *writer) prepareAdd(req AddRequest, fe *core.FieldErrors) (*preparedAdd, error) {
	p := &preparedAdd{req: req}
	fe.Owner(req.Owner)
	fe.Scope(req.Agent, req.Session)
	p.req.Source = fe.Source(req.Source)
	p.req.Category = fe.Category(&s.policy, req.Category)
	p.req.Importance = fe.Importance(req.Importance)
	p.ttl = fe.TTL(req.TTL)
	fe.Text("content", req.Content, core.RawContentLimit(s.policy.Limits.MaxContentBytes))
	if err := fe.Err(); err != nil {
		return nil, err
	}
	if err := core.CheckProtected(&s.policy, p.req.Category, p.req.Source); err != nil {
		return nil, err
	}
	if err := (*longTerm)(s).routeGlobal(&p.req); err != nil {
		return nil, err
	}
	c, err := s.clean("content", req.Content, fe)
	if err != nil {
		return nil, err
	}
	p.content, p.redactions, p.flags = c.text, c.redactions, c.flags
	return p, nil
}

// cleaned is input text made ready to store.
type cleaned struct {
	text       string // redacted; otherwise exactly what was sent
	redactions []string
	flags      []string
}

// clean turns validated input text into what is stored: secrets redacted
// first, so limits.maxContentBytes measures the stored text and the guard
// judges what a model will later read; then the size check; then the
// policy's injection guard. The stored text keeps the characters the caller
// sent (full-width letters, zero-width joiners of emoji sequences): the
// guard matches a normalized copy only (normalizeForGuard), since NFKC
// would also rewrite legitimate text (CJK punctuation, ligatures, superscripts).
func (s *writer) clean(field, raw string, fe *core.FieldErrors) (cleaned, error) {
	return s.cleanWithin(field, raw, s.policy.Limits.MaxContentBytes, fe)
}

// cleanWithin is clean with another bound of the stored size (conversation
// messages have their own, limits.maxMessageBytes).
func (s *writer) cleanWithin(field, raw string, maxStored int, fe *core.FieldErrors) (cleaned, error) {
	var c cleaned
	c.text, c.redactions = s.redactor.Redact(raw)
	fe.StoredSize(field, raw, c.text, maxStored)
	if err := fe.Err(); err != nil {
		return cleaned{}, err
	}
	mode := s.policy.Redaction.InjectionGuard
	if mode == GuardOff {
		return c, nil
	}
	reason := textguard.DetectInjection(c.text)
	switch {
	case reason == "":
	case mode == GuardReject:
		fe.Add(field, "rejected by the injection guard: looks like a prompt injection (%s)", reason)
		return cleaned{}, fe.Err()
	default:
		c.flags = []string{FlagInjection}
	}
	return c, nil
}

// embedAll embeds the content of every prepared write in one call.
func (s *writer) embedAll(ctx context.Context, ps []*preparedAdd) error {
	texts := make([]string, len(ps))
	for i, p := range ps {
		texts[i] = p.content
	}
	vecs, err := s.embedder.Embed(ctx, texts)
	if err != nil {
		return fmt.Errorf("embedding: %w", err)
	}
	if len(vecs) != len(ps) {
		return fmt.Errorf("%w: embedder returned %d vectors for %d texts", ErrUpstream, len(vecs), len(ps))
	}
	for i, p := range ps {
		p.vec = vecs[i]
	}
	return nil
}
