package server

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
)

// rest holds the REST operations: each translates the path, query and body
// into a request of the capability it serves (ops) and its result into a
// reply; the adapter (operation.go) does the rest.
type rest struct {
	ops    *ops
	tokens *Tokens
	// maxImport is --max-import-bytes, the bound of an import's body.
	maxImport int64
}

// addMemory: POST /v1/owners/{owner}/memories. 201 when the write created a
// memory (added, or replaced: the arbiter superseded the neighbour with a
// new one), 200 when it ended in an existing one.
func (a rest) addMemory(c *call, b *addBody) (reply, error) {
	src, err := writeSourceErr(c.credential(), b.Source)
	if err != nil {
		return reply{}, err
	}
	b.Source = src
	res, err := a.ops.add(c.ctx(), b.request(c.owner()))
	if err != nil {
		return reply{}, err
	}
	if res.Action != memory.ActionAdded && res.Action != memory.ActionReplaced {
		return ok(res), nil
	}
	// A memory of a global category is stored under no owner of the
	// API (memory.GlobalOwner): the owner's URL would answer 404.
	if res.Memory.Owner == memory.GlobalOwner {
		return created(res, ""), nil
	}
	return created(res, memoryPath(c.owner(), res.Memory.ID)), nil
}

func memoryPath(owner, id string) string {
	return "/v1/owners/" + url.PathEscape(owner) + "/memories/" + url.PathEscape(id)
}

// addBatch: POST /v1/owners/{owner}/memories/batch. Every item is decoded
// and checked before anything is written; one bad item fails the batch.
func (a rest) addBatch(c *call, b *batchBody) (reply, error) {
	if len(b.Items) == 0 || len(b.Items) > maxBatchItems {
		return reply{}, problemError{validationProblem(fieldErr("items", fmt.Sprintf("must hold 1..%d items, got %d", maxBatchItems, len(b.Items))))}
	}
	reqs, p := batchRequests(c.credential(), c.owner(), b.Items)
	if p != nil {
		return reply{}, problemError{p}
	}
	res, err := a.ops.addBatch(c.ctx(), reqs)
	if err != nil {
		return reply{}, err
	}
	return ok(batchResponse{Results: res}), nil
}

// batchRequests decodes the items of a batch and caps their sources. Every
// item is checked: the problem lists every invalid field, unless an item
// asserts a source above the credential's (403: no fix of the input helps).
func batchRequests(c auth.Credential, owner string, items []json.RawMessage) ([]memory.AddRequest, *Problem) {
	reqs := make([]memory.AddRequest, len(items))
	var errs []memory.FieldError
	var denied *Problem
	for i, raw := range items {
		var item addBody
		if p := decodeStrict(raw, &item, fmt.Sprintf("items[%d]", i)); p != nil {
			if len(p.Errors) == 0 { // cannot happen: raw is valid JSON
				p.Errors = []memory.FieldError{fieldErr(fmt.Sprintf("items[%d]", i), p.Detail)}
			}
			errs = append(errs, p.Errors...)
			continue
		}
		src, p := writeSource(c, item.Source, fmt.Sprintf("items[%d].source", i))
		switch {
		case p != nil && p.Status == http.StatusForbidden:
			denied = cmp.Or(denied, p)
		case p != nil:
			errs = append(errs, p.Errors...)
		}
		item.Source = src
		reqs[i] = item.request(owner)
		reqs[i].OwnerOnly = c.Owner != ""
	}
	if denied != nil {
		return nil, denied
	}
	if len(errs) > 0 {
		return nil, validationProblem(errs...)
	}
	return reqs, nil
}

// credential is the request's credential; handlers registered with
// handleAPI always have one (authorize refuses requests without).
func credential(r *http.Request) auth.Credential {
	c, _ := credentialOf(r.Context())
	return c
}

// listIncludes are the values of list's include parameter: memories left
// out by default (expired: past expiresAt, not yet deactivated by the expire
// job; inactive: deleted, expired, forgotten, superseded).
var listIncludes = []string{"expired", "inactive"}

// listMemories: GET /v1/owners/{owner}/memories.
func (a rest) listMemories(c *call, _ *noBody) (reply, error) {
	q := c.q
	include := q.set("include", listIncludes...)
	req := memory.ListRequest{
		Owner:           c.owner(),
		Agent:           q.str("agent"),
		Session:         q.str("session"),
		Category:        q.str("category"),
		IncludeInactive: q.boolean("includeInactive") || include["inactive"],
		IncludeExpired:  include["expired"],
		Limit:           q.integer("limit"),
		Cursor:          q.str("cursor"),
		Filter:          q.filter("filter"),
	}
	if err := q.err(); err != nil {
		return reply{}, err
	}
	return replyOf(a.ops.list(c.ctx(), req))
}

// getMemory: GET /v1/owners/{owner}/memories/{id}.
func (a rest) getMemory(c *call, _ *noBody) (reply, error) {
	return replyOf(a.ops.get(c.ctx(), c.owner(), c.id()))
}

// updateMemory: PATCH /v1/owners/{owner}/memories/{id}.
func (a rest) updateMemory(c *call, b *updateBody) (reply, error) {
	src, err := writeSourceErr(c.credential(), b.Source)
	if err != nil {
		return reply{}, err
	}
	return replyOf(a.ops.update(c.ctx(), memory.UpdateRequest{
		Owner: c.owner(), ID: c.id(), Source: src,
		Content: b.Content, Category: b.Category, Importance: b.Importance, TTL: b.TTL, Embedding: b.Embedding,
		Metadata: b.Metadata, Tags: b.Tags,
	}))
}

// deleteMemory: DELETE /v1/owners/{owner}/memories/{id}?source=...; a soft
// delete (the purge job removes the row after retention.purgeInactiveAfter).
func (a rest) deleteMemory(c *call, _ *noBody) (reply, error) {
	asked := memory.Source(c.q.str("source"))
	if err := c.q.err(); err != nil {
		return reply{}, err
	}
	source, err := writeSourceErr(c.credential(), asked)
	if err != nil {
		return reply{}, err
	}
	if err := a.ops.store.Delete(c.ctx(), c.owner(), c.id(), source); err != nil {
		return reply{}, err
	}
	return noContent(), nil
}

// supersede: POST /v1/owners/{owner}/memories/{id}/supersede {"by": id}.
func (a rest) supersede(c *call, b *supersedeBody) (reply, error) {
	if fe := uuidField("by", b.By); fe != nil {
		return reply{}, problemError{validationProblem(*fe)}
	}
	src, err := writeSourceErr(c.credential(), b.Source)
	if err != nil {
		return reply{}, err
	}
	return replyOf(a.ops.supersede(c.ctx(), c.owner(), c.id(), b.By, src))
}

// history: GET /v1/owners/{owner}/memories/{id}/history?limit=&cursor=:
// one page, oldest first, within the byte cap.
func (a rest) history(c *call, _ *noBody) (reply, error) {
	req := memory.HistoryRequest{Owner: c.owner(), ID: c.id(), Limit: c.q.integer("limit"), Cursor: c.q.str("cursor")}
	if err := c.q.err(); err != nil {
		return reply{}, err
	}
	return replyOf(a.ops.history(c.ctx(), req))
}

// replyOf is the 200 of a capability's result, or its error.
func replyOf[T any](v *T, err error) (reply, error) {
	if err != nil {
		return reply{}, err
	}
	return ok(v), nil
}
