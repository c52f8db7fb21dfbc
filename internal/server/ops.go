package server

import (
	"context"

	"github.com/engram-dev/engram/internal/memory"
)

// ops are the capabilities of the API. Each one is the single function
// that both the REST operation and the MCP tool of the same capability
// call, so every rule about what a caller gets is decided in one place:
// a model never sees a flagged memory (agentFacing), lists are [] and
// never null, writes are counted, a not-found names the kind of thing the
// route is about. The adapters only translate: REST from the path, query
// and body; MCP from the tool's arguments.
type ops struct {
	store   *memory.Store
	metrics *Metrics
	export  memory.ExportInfo
}

// bound reports whether the request's credential is bound to one owner:
// such a write may reach that owner only (AddRequest.OwnerOnly).
func bound(ctx context.Context) bool {
	c, _ := credentialOf(ctx)
	return c.Owner != ""
}

// add writes one memory.
func (o *ops) add(ctx context.Context, req memory.AddRequest) (*memory.AddResult, error) {
	req.OwnerOnly = bound(ctx)
	res, err := o.store.Add(ctx, req)
	if err != nil {
		return nil, err
	}
	o.metrics.countActions(*res)
	withhold(ctx, &res.Memory)
	return res, nil
}

// addBatch writes the memories of a batch, all or none.
func (o *ops) addBatch(ctx context.Context, reqs []memory.AddRequest) ([]memory.AddResult, error) {
	res, err := o.store.AddBatch(ctx, reqs)
	return o.written(ctx, res, err)
}

// extract writes the facts an LLM finds in messages.
func (o *ops) extract(ctx context.Context, req memory.ExtractRequest) ([]memory.AddResult, error) {
	res, err := o.store.Extract(ctx, req)
	return o.written(ctx, res, err)
}

// written is the reply of a write of several memories: counted by action,
// flagged content withheld from a model, never a null list.
func (o *ops) written(ctx context.Context, res []memory.AddResult, err error) ([]memory.AddResult, error) {
	if err != nil {
		return nil, err
	}
	o.metrics.countActions(res...)
	withholdResults(ctx, res)
	return nonNil(res), nil
}

// list pages through an owner's memories; flagged ones are left out for a model.
func (o *ops) list(ctx context.Context, req memory.ListRequest) (*memory.ListPage, error) {
	req.ExcludeFlagged = agentFacing(ctx)
	page, err := o.store.List(ctx, req)
	if err != nil {
		return nil, err
	}
	page.Items = nonNil(page.Items)
	return page, nil
}

// get reads one memory; a flagged one is not found by a model.
func (o *ops) get(ctx context.Context, owner, id string) (*memory.Memory, error) {
	m, err := o.store.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if hiddenFrom(ctx, m) {
		return nil, memory.ErrNotFound
	}
	return m, nil
}

// visible is nil when the request may see memory id: always for callers
// that are not agent-facing, else when it exists and is not flagged.
func (o *ops) visible(ctx context.Context, owner, id string) error {
	if !agentFacing(ctx) {
		return nil
	}
	_, err := o.get(ctx, owner, id)
	return err
}

// update changes a memory the caller may see.
func (o *ops) update(ctx context.Context, req memory.UpdateRequest) (*memory.Memory, error) {
	if err := o.visible(ctx, req.Owner, req.ID); err != nil {
		return nil, err
	}
	m, err := o.store.Update(ctx, req)
	if err != nil {
		return nil, err
	}
	withhold(ctx, m)
	return m, nil
}

// supersede marks memory id as replaced by memory by.
func (o *ops) supersede(ctx context.Context, owner, id, by string, src memory.Source) (*memory.Memory, error) {
	m, err := o.store.Supersede(ctx, owner, id, by, src)
	if err != nil {
		return nil, err
	}
	withhold(ctx, m)
	return m, nil
}

// history pages through the history of a memory the caller may see.
func (o *ops) history(ctx context.Context, req memory.HistoryRequest) (*memory.HistoryPage, error) {
	if err := o.visible(ctx, req.Owner, req.ID); err != nil {
		return nil, err
	}
	page, err := o.store.History(ctx, req)
	if err != nil {
		return nil, err
	}
	page.Items = nonNil(page.Items)
	withholdHistory(ctx, page.Items)
	return page, nil
}

// search finds an owner's memories; flagged ones are left out for a model.
func (o *ops) search(ctx context.Context, req memory.SearchRequest) (*searchResponse, error) {
	req.ExcludeFlagged = agentFacing(ctx)
	res, err := o.store.SearchAnswer(ctx, req)
	if err != nil {
		return nil, err
	}
	o.metrics.countRerank(res)
	res.Results = nonNil(res.Results)
	return res, nil
}

// context renders an owner's memories for a prompt.
func (o *ops) context(ctx context.Context, req memory.ContextRequest) (*memory.ContextResult, error) {
	res, err := o.store.Context(ctx, req)
	if err != nil {
		return nil, err
	}
	res.IDs = nonNil(res.IDs)
	return res, nil
}

// nonNil turns a nil slice into an empty one, so lists are [] and never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
