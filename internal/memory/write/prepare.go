package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/engram-dev/engram/internal/memory/core"
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
	p.req.Category = fe.Category(&s.core.Policy, req.Category)
	p.req.Importance = fe.Importance(req.Importance)
	p.ttl = fe.TTL(req.TTL)
	fe.Text("content", req.Content, core.RawContentLimit(s.core.Policy.Limits.MaxContentBytes))
	if err := fe.Err(); err != nil {
		return nil, err
	}
	if err := core.CheckProtected(&s.core.Policy, p.req.Category, p.req.Source); err != nil {
		return nil, err
	}
	if err := (*longTerm)(s).routeGlobal(&p.req); err != nil {
		return nil, err
	}
	c, err := s.clean("content", req.Content, fe)
	if err != nil {
		return nil, err
	}
	p.content, p.redactions, p.flags = c.Text, c.Redactions, c.Flags
	return p, nil
}

// clean turns validated input text into what is stored, bounded by
// limits.maxContentBytes (core.State.CleanWithin: redaction, the size
// check, the injection guard).
func (s *writer) clean(field, raw string, fe *core.FieldErrors) (core.Cleaned, error) {
	return s.core.CleanWithin(field, raw, s.core.Policy.Limits.MaxContentBytes, fe)
}

// embedAll embeds the content of every prepared write in one call.
func (s *writer) embedAll(ctx context.Context, ps []*preparedAdd) error {
	texts := make([]string, len(ps))
	for i, p := range ps {
		texts[i] = p.content
	}
	vecs, err := s.core.Embedder.Embed(ctx, texts)
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
