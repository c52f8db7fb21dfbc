package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/engram-dev/engram/internal/memory"
)

// Capabilities of long-term memory that REST and MCP share
// (docs/long-term.md).

// extractSession extracts the facts of a session's new messages.
func (o *ops) extractSession(ctx context.Context, req memory.SessionExtractRequest) (*memory.SessionExtractResult, error) {
	res, err := o.store.ExtractSession(ctx, req)
	if err != nil {
		return nil, inResource(err, resSession)
	}
	o.extracted(ctx, res)
	return res, nil
}

// extracted counts the writes of an extraction like those of an add and
// withholds what a model may not see.
func (o *ops) extracted(ctx context.Context, res *memory.SessionExtractResult) {
	for _, f := range res.Facts {
		if f.Result != nil {
			o.metrics.countActions(*f.Result)
		}
	}
	res.Facts = nonNil(res.Facts)
	withholdExtraction(ctx, res)
}

// searchEpisodes ranks the episodes of an owner's past sessions.
func (o *ops) searchEpisodes(ctx context.Context, req memory.EpisodeSearchRequest) (*episodeSearchResponse, error) {
	res, err := o.store.SearchEpisodes(ctx, req)
	if err != nil {
		return nil, err
	}
	res.Results = nonNil(res.Results)
	return res, nil
}

// getDocument reads a profile or constraints document. A document never
// written is version 0 with empty content; a past version that does not
// exist is a not-found naming it.
func (o *ops) getDocument(ctx context.Context, req memory.GetDocumentRequest) (*memory.Document, error) {
	d, err := o.store.GetDocument(ctx, req)
	if errors.Is(err, memory.ErrNotFound) {
		return nil, problemError{noVersion(req.Kind, req.Version)}
	}
	return d, err
}

// noVersion is the 404 of a past version of a document that does not exist.
func noVersion(kind memory.DocumentKind, version int64) *Problem {
	return newProblem(probNotFound, fmt.Sprintf("the %s has no version %d", kind, version))
}

// putDocument writes a new version of a document. Constraints are the
// user's rules for the agent: another source than user is refused with
// the rule spelt out.
func (o *ops) putDocument(ctx context.Context, req memory.PutDocumentRequest) (*memory.Document, error) {
	d, err := o.store.PutDocument(ctx, req)
	if req.Kind == memory.DocConstraints && errors.Is(err, memory.ErrProtected) {
		return nil, problemError{newProblem(probProtected, constraintsDetail)}
	}
	return d, err
}

// constraintsDetail is the 403 of a constraints write by another source than user.
const constraintsDetail = `the constraints are the user's rules for the agent: only source "user" may write them (an app or admin token sending "source": "user")`
