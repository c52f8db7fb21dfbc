package write

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/modelapi"
)

// Preparing a write, before any transaction: validation, redaction, the
// injection guard, the stored size, and the embedding.

// prepareAll validates a batch; protected-category violations become field
// errors too, so the caller gets every problem at once.
func (s *Store) prepareAll(reqs []AddRequest) ([]*Prepared, error) {
	all := &core.FieldErrors{}
	prepared := make([]*Prepared, len(reqs))
	for i, r := range reqs {
		fe := &core.FieldErrors{Prefix: fmt.Sprintf("items[%d].", i)}
		p, err := s.Prepare(r, fe)
		if errors.Is(err, core.ErrProtected) {
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

// Prepare validates req, redacts secrets, checks the stored size and
// applies the injection guard.
func (s *Store) Prepare(req AddRequest, fe *core.FieldErrors) (*Prepared, error) {
	p := &Prepared{Req: req}
	fe.Owner(req.Owner)
	fe.Scope(req.Agent, req.Session)
	p.Req.Source = fe.Source(req.Source)
	p.Req.Category = fe.Category(&s.core.Policy, req.Category)
	p.Req.Importance = fe.Importance(req.Importance)
	p.ttl = fe.TTL(req.TTL)
	fe.Text("content", req.Content, core.RawContentLimit(s.core.Policy.Limits.MaxContentBytes))
	if req.Embedding != nil {
		fe.Vector("embedding", req.Embedding, s.core.Embedder.Dimensions())
	}
	p.Req.Metadata = fe.Metadata("metadata", req.Metadata)
	fe.Tags("tags", req.Tags)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	if err := core.CheckProtected(&s.core.Policy, p.Req.Category, p.Req.Source); err != nil {
		return nil, err
	}
	if err := s.routeGlobal(&p.Req); err != nil {
		return nil, err
	}
	c, err := s.Clean("content", req.Content, fe)
	if err != nil {
		return nil, err
	}
	p.Content, p.redactions, p.Flags = c.Text, c.Redactions, c.Flags
	if req.Embedding != nil {
		p.Vec = slices.Clone(req.Embedding) // the caller's slice stays the caller's
	}
	return p, nil
}

// Clean turns validated input text into what is stored, bounded by
// limits.maxContentBytes (core.State.CleanWithin: redaction, the size
// check, the injection guard).
func (s *Store) Clean(field, raw string, fe *core.FieldErrors) (core.Cleaned, error) {
	return s.core.CleanWithin(field, raw, s.core.Policy.Limits.MaxContentBytes, fe)
}

// EmbedAll embeds, in one call, the content of every prepared write that
// has no vector yet: a write whose client sent its own embedding
// (AddRequest.Embedding) keeps it, and when every write has one the
// embedder is not called at all.
//
// While the tenant re-embeds toward the store's next embedder, the next
// embedder's vectors of every write are computed meanwhile, in one call
// of their own (core.State.NextVectors): best effort, a write without one
// is stored all the same.
func (s *Store) EmbedAll(ctx context.Context, ps []*Prepared) error {
	all := make([]string, len(ps))
	for i, p := range ps {
		all[i] = p.Content
	}
	next := s.core.NextVectors(ctx, all)
	if err := s.embedCurrent(ctx, ps); err != nil {
		return err
	}
	if vecs := next(); vecs != nil {
		for i, p := range ps {
			p.NextVec = vecs[i]
		}
	}
	return nil
}

// embedCurrent embeds with the current embedder the writes without a vector.
func (s *Store) embedCurrent(ctx context.Context, ps []*Prepared) error {
	var need []*Prepared
	for _, p := range ps {
		if p.Vec == nil {
			need = append(need, p)
		}
	}
	if len(need) == 0 {
		return nil
	}
	texts := make([]string, len(need))
	for i, p := range need {
		texts[i] = p.Content
	}
	vecs, err := s.core.Embedder.Embed(ctx, texts)
	if err != nil {
		return fmt.Errorf("embedding: %w", err)
	}
	if len(vecs) != len(need) {
		return fmt.Errorf("%w: embedder returned %d vectors for %d texts", modelapi.ErrUpstream, len(vecs), len(need))
	}
	for i, p := range need {
		p.Vec = vecs[i]
	}
	return nil
}
