package portable

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
)

// PageRows is the keyset page of an export: at most this many rows of one
// kind are read, written and flushed at a time, so an export holds one
// page in memory whatever the size of the tenant.
const PageRows = 200

// Info is what a header says about the service that wrote it.
type Info struct {
	EngramVersion string
	Embedder      Embedder
	Policy        string
}

// ExportRequest is one part of an export.
type ExportRequest struct {
	// Owner is the owner exported; "" exports the whole tenant.
	Owner   string
	Vectors bool
	// After resumes from a cursor of a checkpoint or trailer line.
	After string
	// StopAt, when set, ends the part at the first page boundary past it,
	// with a trailer whose next cursor resumes (the request's deadline).
	StopAt time.Time
	Info   Info
	// PageRows is the page size (0: PageRows); tests make it small to
	// cross page boundaries.
	PageRows int
}

// Store exports and imports one tenant's schema.
type Store struct {
	core  *core.State
	kinds []kindSpec
}

// New returns the portable part of the engine over st.
func New(st *core.State) *Store {
	return &Store{core: st, kinds: specs(st.Schema)}
}

// Export writes one part of an export to w, calling flush after each page,
// all read in one repeatable-read, read-only snapshot. Errors found before
// anything is written (a bad cursor: ValidationError; the database) come
// back with nothing written; an error after that ends the stream without
// a trailer, which a reader takes as a cut part.
func (s *Store) Export(ctx context.Context, req ExportRequest, w io.Writer, flush func() error) (*Trailer, error) {
	c, err := decodeCursor(req.After)
	if err == nil && c.Owner != "" && !c.validFor(&s.kinds[c.Kind]) {
		err = errCursor
	}
	if err == nil && req.Owner != "" && c.Owner != "" && c.Owner != req.Owner {
		err = errCursor
	}
	if err != nil {
		return nil, core.Invalid("after", "%s", err.Error())
	}
	tx, err := s.core.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, core.DBErr("beginning the export", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// json_build_object writes timestamps in the session's time zone.
	if _, err := tx.Exec(ctx, `SET LOCAL TimeZone = 'UTC'`); err != nil {
		return nil, core.DBErr("setting the export's time zone", err)
	}
	h, err := s.header(ctx, tx, req)
	if err != nil {
		return nil, err
	}
	if req.PageRows <= 0 {
		req.PageRows = PageRows
	}
	e := &exporter{s: s, tx: tx, req: req, w: w, flush: flush, sum: sha256.New(), counts: zeroCounts()}
	if err := e.line(h); err != nil {
		return nil, err
	}
	return e.run(ctx, c)
}

// header builds the part's header, with the scope's counts in the snapshot.
func (s *Store) header(ctx context.Context, tx pgx.Tx, req ExportRequest) (*Header, error) {
	h := &Header{Kind: KindHeader, FormatVersion: FormatVersion, EngramVersion: req.Info.EngramVersion,
		Scope: "tenant", Owner: req.Owner, Embedder: req.Info.Embedder, Policy: req.Info.Policy,
		Vectors: req.Vectors, After: req.After, ExportedAt: time.Now().UTC().Format(time.RFC3339Nano),
		Counts: zeroCounts()}
	if req.Owner != "" {
		h.Scope = "owner"
	}
	for i := range s.kinds {
		k := &s.kinds[i]
		var args []any
		if req.Owner != "" {
			args = append(args, req.Owner)
		}
		var n int64
		if err := tx.QueryRow(ctx, k.countSQL(req.Owner == ""), args...).Scan(&n); err != nil {
			return nil, core.DBErr("counting the export's "+k.kind+" records", err)
		}
		h.Counts[k.kind] = n
	}
	return h, nil
}

func zeroCounts() map[string]int64 {
	m := make(map[string]int64, len(RecordKinds))
	for _, k := range RecordKinds {
		m[k] = 0
	}
	return m
}

// exporter is the state of one part being written.
type exporter struct {
	s      *Store
	tx     pgx.Tx
	req    ExportRequest
	w      io.Writer
	flush  func() error
	sum    hash.Hash
	lines  int64
	counts map[string]int64
}

// Checkpoint is the line after each page: the cursor to resume from.
type Checkpoint struct {
	Kind string `json:"kind"`
	Next string `json:"next"`
}

// KindCheckpoint is the kind of a checkpoint line.
const KindCheckpoint = "checkpoint"

// run writes the owners from c on, then the trailer.
func (e *exporter) run(ctx context.Context, c cursor) (*Trailer, error) {
	owner := c.Owner
	if owner == "" {
		owner = e.req.Owner
	}
	if owner == "" {
		var err error
		if owner, err = e.nextOwner(ctx, ""); err != nil {
			return nil, err
		}
	}
	for owner != "" {
		stopped, err := e.owner(ctx, owner, c)
		if err != nil || stopped != nil {
			return e.trailer(stopped, err)
		}
		c = cursor{}
		if e.req.Owner != "" {
			break
		}
		if owner, err = e.nextOwner(ctx, owner); err != nil {
			return nil, err
		}
	}
	return e.trailer(nil, nil)
}

// owner writes the records of one owner from c (when c is at this owner);
// it returns the cursor to resume from when the part's time ran out.
func (e *exporter) owner(ctx context.Context, owner string, c cursor) (*cursor, error) {
	first, key := 0, []string(nil)
	if c.Owner == owner {
		first, key = c.Kind, c.Key
	}
	for ki := first; ki < len(e.s.kinds); ki++ {
		for {
			next, n, err := e.page(ctx, owner, ki, key)
			if err != nil {
				return nil, err
			}
			if n == 0 {
				break
			}
			key = next
			at := cursor{Owner: owner, Kind: ki, Key: key}
			if err := e.line(Checkpoint{Kind: KindCheckpoint, Next: at.encode()}); err != nil {
				return nil, err
			}
			if err := e.flush(); err != nil {
				return nil, fmt.Errorf("flushing the export: %w", err)
			}
			if !e.req.StopAt.IsZero() && time.Now().After(e.req.StopAt) {
				return &at, nil
			}
			if n < e.req.PageRows {
				break
			}
		}
		key = nil
	}
	return nil, nil
}

// page writes one page of kind ki of owner after key, returning the last
// key written and how many rows.
func (e *exporter) page(ctx context.Context, owner string, ki int, key []string) ([]string, int, error) {
	k := &e.s.kinds[ki]
	args := []any{owner}
	for _, v := range key {
		args = append(args, v)
	}
	rows, err := e.tx.Query(ctx, k.pageSQL(key != nil, e.req.Vectors, e.req.PageRows), args...)
	if err != nil {
		return nil, 0, core.DBErr("reading "+k.kind+" records", err)
	}
	defer rows.Close()
	last := make([]string, len(k.keyCols))
	dest := make([]any, len(k.keyCols)+1)
	for i := range last {
		dest[i] = &last[i]
	}
	var line []byte
	dest[len(last)] = &line
	n := 0
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, 0, core.DBErr("reading "+k.kind+" records", err)
		}
		if err := e.raw(line); err != nil {
			return nil, 0, err
		}
		e.counts[k.kind]++
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, 0, core.DBErr("reading "+k.kind+" records", err)
	}
	return last, n, nil
}

// nextOwner is the first owner after `after` holding a row of any table
// an owner's records start from (a min over each table's owner index).
func (e *exporter) nextOwner(ctx context.Context, after string) (string, error) {
	t := e.s.core.Table
	var next *string
	err := e.tx.QueryRow(ctx, `SELECT least(
		(SELECT min(owner_id) FROM `+t("memories")+` WHERE owner_id > $1),
		(SELECT min(owner_id) FROM `+t("memory_history")+` WHERE owner_id > $1),
		(SELECT min(owner_id) FROM `+t("sessions")+` WHERE owner_id > $1),
		(SELECT min(owner_id) FROM `+t("episodes")+` WHERE owner_id > $1),
		(SELECT min(owner_id) FROM `+t("documents")+` WHERE owner_id > $1),
		(SELECT min(owner_id) FROM `+t("document_changes")+` WHERE owner_id > $1))`, after).Scan(&next)
	if err != nil {
		return "", core.DBErr("finding the next owner to export", err)
	}
	if next == nil {
		return "", nil
	}
	return *next, nil
}

// line writes v as one line.
func (e *exporter) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding an export line: %w", err)
	}
	return e.raw(b)
}

// raw writes one line (b without its newline), into the checksum too.
func (e *exporter) raw(b []byte) error {
	b = append(b, '\n')
	e.sum.Write(b)
	e.lines++
	if _, err := e.w.Write(b); err != nil {
		return fmt.Errorf("writing the export: %w", err)
	}
	return nil
}

// trailer ends the part: complete, or with the cursor it stopped at.
func (e *exporter) trailer(stopped *cursor, err error) (*Trailer, error) {
	if err != nil {
		return nil, err
	}
	t := &Trailer{Kind: KindTrailer, Counts: e.counts, Lines: e.lines, SHA256: hex.EncodeToString(e.sum.Sum(nil)), Complete: stopped == nil}
	if stopped != nil {
		t.Next = stopped.encode()
	}
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encoding the export's trailer: %w", err)
	}
	if _, err := e.w.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("writing the export: %w", err)
	}
	return t, e.flush()
}
