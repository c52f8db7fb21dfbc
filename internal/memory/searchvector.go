package memory

import (
	"context"
	"fmt"
	"slices"

	"github.com/engram-dev/engram/internal/memory/core"
)

// Search with the client's own query vector (SearchRequest.Vector): teams
// that embed with their own service send the vector, and Engram calls no
// embedder for the query.

// checkQuery checks the query text and the client's vector of a search in
// mode: a vector search with a vector needs no text; text search ranks by
// words only, so a vector there is refused rather than silently ignored.
func (s *reader) checkQuery(fe *core.FieldErrors, req SearchRequest, mode SearchMode) {
	filterSQL(fe, &core.Args{}, req.Filter)
	if req.Vector != nil && mode == SearchText {
		fe.Add("vector", "is not used by text search: use mode vector or hybrid")
		return
	}
	if req.Vector != nil {
		fe.Vector("vector", req.Vector, s.core.Embedder.Dimensions())
		if mode == SearchVector && req.Query == "" {
			return
		}
	}
	fe.Text("query", req.Query, s.core.Policy.Limits.MaxQueryBytes)
}

// queryVector is the query's vector in mode: none for text search, the
// client's when given, else the embedder's of the (redacted) query.
func (s *reader) queryVector(ctx context.Context, req SearchRequest, mode SearchMode) ([]float32, error) {
	switch {
	case mode == SearchText:
		return nil, nil
	case req.Vector != nil:
		return slices.Clone(req.Vector), nil
	}
	vecs, err := s.core.Embedder.Embed(ctx, []string{req.Query})
	if err != nil {
		return nil, fmt.Errorf("embedding the query: %w", err)
	}
	return vecs[0], nil
}
