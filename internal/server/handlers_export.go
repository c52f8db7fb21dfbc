package server

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
)

// Export and import (docs/export.md). An owner's export is for app and
// admin tokens (a token bound to an owner exports that owner only): it
// holds what the injection guard flagged, which an agent token never
// reads. The tenant's export and the import are for admin tokens not
// bound to an owner.

const importPath = "/v1/import"

// exportParams: GET /v1/export and GET /v1/owners/{owner}/export.
var exportParams = params{
	{"vectors", "true: each memory, message, summary and episode carries its embedding; absent or false: none (an import embeds again)."},
	{"after", "Resume from this cursor: the `next` of a checkpoint line or of a trailer whose `complete` is false."},
}

// importParams: POST /v1/import.
var importParams = params{{"dryRun", "true: validate and count what would be written, write nothing."}}

func (s *Server) registerExportRoutes(owner string, a rest) {
	handleOp(s, "GET "+owner+"/export", auth.RoleApp, a.exportOwner, withQuery(exportParams))
	handleOp(s, "GET /v1/export", auth.RoleAdmin, a.exportTenant, withQuery(exportParams), tenantWideRoute())
	handleOp(s, "POST "+importPath, auth.RoleAdmin, a.importExport, withQuery(importParams), withRawBody("application/x-ndjson"), tenantWideRoute())
}

// exportMargin is what a part leaves of the request's deadline to finish
// its page and write its trailer: it stops at the first page boundary
// past deadline - margin, so --request-timeout never cuts it.
func exportStopAt(ctx context.Context) time.Time {
	deadline, ok := ctx.Deadline()
	if !ok {
		return time.Time{}
	}
	margin := min(5*time.Second, time.Until(deadline)/4)
	return deadline.Add(-margin)
}

// exportOwner: GET /v1/owners/{owner}/export.
func (a rest) exportOwner(c *call, _ *noBody) (reply, error) {
	if !memory.ValidScopeID(c.owner()) {
		return reply{}, problemError{validationProblem(fieldErr("owner", scopeIDMessage))}
	}
	return a.export(c, c.owner())
}

// exportTenant: GET /v1/export.
func (a rest) exportTenant(c *call, _ *noBody) (reply, error) { return a.export(c, "") }

func (a rest) export(c *call, owner string) (reply, error) {
	req := memory.ExportRequest{Owner: owner, Vectors: c.q.boolean("vectors"), After: c.q.str("after"),
		StopAt: exportStopAt(c.ctx()), Info: a.ops.export}
	if err := c.q.err(); err != nil {
		return reply{}, err
	}
	return streamed("application/x-ndjson", func(w io.Writer, flush func() error) error {
		_, err := a.ops.store.Export(c.ctx(), req, w, flush)
		return err
	}), nil
}

// importExport: POST /v1/import, the body an export (JSON Lines).
func (a rest) importExport(c *call, _ *noBody) (reply, error) {
	dry := c.q.boolean("dryRun")
	if err := c.q.err(); err != nil {
		return reply{}, err
	}
	body, err := importBody(c.r, a.maxImport)
	if err != nil {
		return reply{}, problemError{newProblem(probMalformed, "reading the request body failed")}
	}
	if int64(len(body)) > a.maxImport {
		return reply{}, problemError{tooLarge(a.maxImport)}
	}
	res, err := a.ops.store.Import(c.ctx(), memory.ImportRequest{Body: body, DryRun: dry, Embedder: a.ops.export.Embedder})
	if err != nil {
		return reply{}, err
	}
	return ok(res), nil
}

// importBody is the body of an import, read already (requestbody.go) to
// at most one byte past --max-import-bytes: the buffer itself, not a copy
// (it may be tens of MiB).
func importBody(r *http.Request, limit int64) ([]byte, error) {
	if bb, ok := r.Body.(*bufferedBody); ok {
		return bb.data, nil
	}
	return io.ReadAll(io.LimitReader(r.Body, limit+1)) // no body at all (http.NoBody)
}
