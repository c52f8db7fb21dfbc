package portable

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engram-dev/engram/internal/memory/core"
)

// ImportRequest is one import.
type ImportRequest struct {
	Body []byte
	// DryRun runs every owner's transaction and rolls it back: the counts
	// are exact, nothing is written, no embedder is called.
	DryRun bool
	// Embedder is this runtime's: vectors of another are computed again.
	Embedder Embedder
}

// ImportResult says what an import did (or, dry, would do).
type ImportResult struct {
	DryRun bool `json:"dryRun"`
	Lines  int  `json:"lines"`
	Parts  int  `json:"parts"`
	Owners int  `json:"owners"`
	// Records are the data records read, by kind (a repeated line once).
	Records Counts `json:"records"`
	// Inserted are the rows written; Existing the records skipped because
	// the tenant holds that id (or key) already: an import never overwrites.
	Inserted Counts `json:"inserted"`
	Existing Counts `json:"existing"`
	// Embedded counts the vectors computed on the way in (on a dry run,
	// those that would be).
	Embedded int64 `json:"embedded"`
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

// Import validates every line of req.Body, then writes each owner's
// records in one transaction of its own (all or nothing of that owner),
// skipping rows the tenant already holds. A bad line is a ValidationError
// naming lines[N].field and nothing is written. When writing an owner
// fails, the owners before it stay written and the error says which owner
// failed; running the import again is safe (idempotent).
func (s *Store) Import(ctx context.Context, req ImportRequest) (*ImportResult, error) {
	p := &parser{target: req.Embedder, check: checker{fe: &core.FieldErrors{}, policy: &s.core.Policy}}
	in, err := p.parse(req.Body)
	if err != nil {
		return nil, err
	}
	res := &ImportResult{DryRun: req.DryRun, Lines: in.lines, Parts: in.parts, Owners: len(in.owners),
		Records: in.counts, Inserted: zeroCounts(), Existing: zeroCounts()}
	for _, g := range in.owners {
		if err := s.importOwner(ctx, g, req, res); err != nil {
			return res, fmt.Errorf("importing owner %q: %w", g.owner, err)
		}
	}
	return res, nil
}

// importOwner embeds what needs it, then writes the owner in one
// transaction under the owner's lock (so no add of the owner interleaves).
func (s *Store) importOwner(ctx context.Context, g *ownerRecords, req ImportRequest, res *ImportResult) error {
	n, err := s.embed(ctx, g, req.DryRun)
	if err != nil {
		return err
	}
	counts := ownerCounts{inserted: zeroCounts(), existing: zeroCounts()}
	err = s.core.InTx(ctx, func(tx pgx.Tx) error {
		if err := s.core.LockOwner(ctx, tx, g.owner); err != nil {
			return err
		}
		if err := (&ownerWriter{s: s, tx: tx, g: g, c: &counts}).write(ctx); err != nil {
			return err
		}
		if req.DryRun {
			return errDryRun
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return refused(g.owner, err)
	}
	for k := range counts.inserted {
		res.Inserted[k] += counts.inserted[k]
		res.Existing[k] += counts.existing[k]
	}
	res.Embedded += n
	return nil
}

// refused turns a rule of the schema the owner's records break (a message
// of a session neither the file nor the tenant holds, a summary whose range
// does not fit: SQLSTATE class 23) into a ValidationError naming the owner:
// the file is at fault, not the service. Nothing of the owner was written.
func refused(owner string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && strings.HasPrefix(pe.Code, "23") {
		return core.Invalid("owners["+owner+"]", "the owner's records break a rule of the schema (%s: %s); "+
			"a record may refer to a row neither the file nor this tenant holds", pe.ConstraintName, pe.Message)
	}
	return err
}

// ownerCounts are one owner's counts, added to the result once its
// transaction is over.
type ownerCounts struct{ inserted, existing map[string]int64 }

// embedBatch is how many texts one embedder call gets on import.
const embedBatch = 64

// embed computes the vectors the owner's records need, in batches; a dry
// run counts them and fills zero vectors (rolled back anyway).
func (s *Store) embed(ctx context.Context, g *ownerRecords, dry bool) (int64, error) {
	var texts []string
	var dests []*[]float32
	for _, k := range []string{KindMessage, KindSummary, KindEpisode, KindMemory} {
		for _, r := range g.byKind[k] {
			if !r.embed {
				continue
			}
			text, dest := embedTarget(r.value)
			texts, dests = append(texts, text), append(dests, dest)
		}
	}
	dims := s.core.Embedder.Dimensions()
	for i := 0; i < len(texts); i += embedBatch {
		j := min(i+embedBatch, len(texts))
		var vecs [][]float32
		if dry {
			vecs = make([][]float32, j-i)
			for v := range vecs {
				vecs[v] = make([]float32, dims)
			}
		} else {
			var err error
			if vecs, err = s.core.Embedder.Embed(ctx, texts[i:j]); err != nil {
				return 0, fmt.Errorf("embedding: %w", err)
			}
			if len(vecs) != j-i {
				return 0, fmt.Errorf("embedding: the embedder returned %d vectors for %d texts", len(vecs), j-i)
			}
		}
		for v, d := range dests[i:j] {
			*d = vecs[v]
		}
	}
	return int64(len(texts)), nil
}

// embedTarget is the text a record's vector is made from and where it goes.
func embedTarget(v any) (string, *[]float32) {
	switch r := v.(type) {
	case *messageRec:
		return r.Content, &r.Embedding
	case *summaryRec:
		return r.Content, &r.Embedding
	case *episodeRec:
		return r.Summary, &r.Embedding
	case *memoryRec:
		return r.Content, &r.Embedding
	}
	panic(fmt.Sprintf("portable: no vector in %T", v))
}
