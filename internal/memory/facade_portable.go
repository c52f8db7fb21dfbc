package memory

import (
	"context"
	"io"

	"github.com/engram-dev/engram/internal/memory/portable"
)

// The export and import format (internal/memory/portable, docs/export.md).
type (
	ExportRequest  = portable.ExportRequest
	ExportInfo     = portable.Info
	ExportEmbedder = portable.Embedder
	ExportTrailer  = portable.Trailer
	ImportRequest  = portable.ImportRequest
	ImportResult   = portable.ImportResult
)

// Export writes one part of an export of an owner or of the tenant to w
// (portable.Store.Export).
func (s *Store) Export(ctx context.Context, req ExportRequest, w io.Writer, flush func() error) (*ExportTrailer, error) {
	return portable.New(s.core).Export(ctx, req, w, flush)
}

// Import validates and writes an export, each owner in one transaction
// (portable.Store.Import).
func (s *Store) Import(ctx context.Context, req ImportRequest) (*ImportResult, error) {
	return portable.New(s.core).Import(ctx, req)
}
