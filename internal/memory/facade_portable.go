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
	ExportHeader   = portable.Header
	ExportTrailer  = portable.Trailer
	ExportCounts   = portable.Counts
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

// What a client of the format (kubectl engram, the bench) reads of a file:
// its record kinds, the longest line, and how it is cut into import
// requests of whole owners.
const (
	ExportKindHeader     = portable.KindHeader
	ExportKindMemory     = portable.KindMemory
	ExportKindHistory    = portable.KindHistory
	ExportKindCheckpoint = portable.KindCheckpoint
	ExportKindTrailer    = portable.KindTrailer
	ExportMaxLineBytes   = portable.MaxLineBytes
	ExportFormatVersion  = portable.FormatVersion
)

// ChunkExport cuts an export file into import bodies of whole owners of at
// most max bytes each (portable.Chunk).
func ChunkExport(r io.Reader, max int64, send func([]byte) error) error {
	return portable.Chunk(r, max, send)
}
