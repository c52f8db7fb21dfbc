package jobrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// ExportDestination is where an export run writes (flags --export-*).
// Exactly one of Dir and S3 is set.
type ExportDestination struct {
	// Vectors includes each memory's embedding.
	Vectors bool
	// Dir is a mounted directory (the RetentionJob's PVC); Claim and
	// SubPath only name it in the summary's location.
	Dir, Claim, SubPath string
	S3                  *S3Destination
	// PartSize is the size of one part of an S3 multipart upload, and of
	// the buffer the export is held in at most.
	PartSize int64
}

// sink is an open export file or object: writes, then Commit makes it
// visible under its final name, or Abort removes what was written. A sink
// never shows a half-written export under the final name.
type sink interface {
	io.Writer
	// Commit completes the file or object and returns its location.
	Commit(ctx context.Context) (string, error)
	// Abort removes what was written; best effort, its error is only reported.
	Abort(ctx context.Context) error
}

// exportRunner runs the export operation beside the engine's maintenance
// operations (Runner.RunJob).
type exportRunner struct {
	Runner
	store  exportStore
	schema string
	info   memory.ExportInfo
	dest   *ExportDestination
	now    func() time.Time
}

// Exporter runs the export operation (a Runner built with a destination).
type Exporter interface {
	RunExport(ctx context.Context, dryRun bool) (*memory.JobSummaryOp, error)
}

// exportStore is what the export operation needs of a store.
type exportStore interface {
	Export(ctx context.Context, req memory.ExportRequest, w io.Writer, flush func() error) (*memory.ExportTrailer, error)
}

// exportName is the file or object name of a run: the schema and the
// run's UTC time, so runs sort by time and never overwrite each other.
func exportName(schema string, at time.Time) string {
	return fmt.Sprintf("%s-%s.jsonl", schema, at.UTC().Format("20060102T150405Z"))
}

// RunExport streams the tenant's export to the destination: each page goes
// straight to the sink (a file, or the current part of a multipart
// upload), so the run holds at most one part whatever the tenant's size.
// In a dry run it is counted and written nowhere.
func (e *exportRunner) RunExport(ctx context.Context, dryRun bool) (*memory.JobSummaryOp, error) {
	start := time.Now()
	name := exportName(e.schema, e.now())
	var s sink = discard{}
	if !dryRun {
		var err error
		if s, err = e.open(ctx, name); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
	}
	cw := &countingWriter{w: s}
	tr, err := e.store.Export(ctx, memory.ExportRequest{Vectors: e.dest.Vectors, Info: e.info}, cw, func() error { return nil })
	if err == nil && !tr.Complete {
		err = errors.New("the export stopped before its end") // cannot happen: no StopAt
	}
	var loc string
	if err == nil {
		loc, err = s.Commit(ctx)
	}
	if err != nil {
		if aerr := s.Abort(context.WithoutCancel(ctx)); aerr != nil {
			err = fmt.Errorf("%w (removing the partial export failed too: %v)", err, aerr)
		}
		return nil, fmt.Errorf("export: %w", err)
	}
	var records int64
	for _, n := range tr.Counts {
		records += n
	}
	return &memory.JobSummaryOp{Name: memory.OpExport, Scanned: records, DurationMillis: time.Since(start).Milliseconds(),
		Export: &memory.JobExport{Location: loc, Bytes: cw.n, Records: tr.Counts, SHA256: tr.SHA256}}, nil
}

// open starts the file or the upload.
func (e *exportRunner) open(ctx context.Context, name string) (sink, error) {
	if e.dest.S3 != nil {
		return openS3(ctx, e.dest.S3, name, e.dest.PartSize), nil
	}
	return openFile(e.dest.Dir, e.dest.Claim, e.dest.SubPath, name)
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// discard is the sink of a dry run.
type discard struct{}

func (discard) Write(p []byte) (int, error)            { return len(p), nil }
func (discard) Commit(context.Context) (string, error) { return "", nil }
func (discard) Abort(context.Context) error            { return nil }
