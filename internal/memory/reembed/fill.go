package reembed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/modelapi"
)

// MaxBatch is the most rows one FillBatch embeds and writes: one embedder
// call and one transaction of at most MaxBatch single-row updates (at
// 64 KiB a text, 16 MiB read and sent to the embedder).
const MaxBatch = 256

// Filler fills the shadow columns of one tenant with the vectors of the
// embedder the re-embed names, one bounded batch a call. It keeps where it
// is in memory only: a new Filler (after a crash, on another pod) starts
// over, and the partial index of the rows left (todoIndex) makes it skip
// every row already filled without reading it. Rows are filled at most
// once: a batch writes only rows that have no new vector yet and whose
// text is still the text it embedded.
type Filler struct {
	pool  *pgxpool.Pool
	t     Target
	id    Embedder
	emb   modelapi.Embedder
	table int     // the table the last batch came from
	after [][]any // per table: the key of the last row read
}

// NewFiller returns a Filler that embeds with emb, which must be the
// embedder id names (the re-embed's next one).
func NewFiller(pool *pgxpool.Pool, t Target, id Embedder, emb modelapi.Embedder) *Filler {
	return &Filler{pool: pool, t: t, id: id, emb: emb, after: make([][]any, len(vectorTables))}
}

// pending is one row of a batch: its key, text and the md5 of its text.
type pending struct {
	key       []any
	text, md5 string
}

// FillBatch embeds at most n rows (1..MaxBatch) still without their new
// vector and writes their vectors in one short transaction that also
// counts them in the reembed row. It returns how many rows it filled and
// done when no row without its new vector was left to read (the re-embed
// may switch). A row whose text changed while it was embedded is left for
// a later batch. ErrNotFilling: the re-embed was switched or aborted;
// ErrWrongEmbedder: it fills with another embedder than the Filler's.
func (f *Filler) FillBatch(ctx context.Context, n int) (filled int64, done bool, err error) {
	if n < 1 || n > MaxBatch {
		return 0, false, fmt.Errorf("a re-embed batch holds 1..%d rows, not %d", MaxBatch, n)
	}
	if f.emb.Dimensions() != f.id.Dimensions {
		return 0, false, fmt.Errorf("filling with %s: the embedder makes %d dimensions: %w", f.id, f.emb.Dimensions(), ErrWrongEmbedder)
	}
	st, err := ReadState(ctx, f.pool, f.t)
	if err != nil {
		return 0, false, err
	}
	if st.Phase != PhaseFilling {
		return 0, false, ErrNotFilling
	}
	if st.Next != f.id {
		return 0, false, fmt.Errorf("filling with %s, the re-embed fills with %s: %w", f.id, st.Next, ErrWrongEmbedder)
	}
	// Every table once, from the one the last batch came from: done only
	// when none has a row left, whichever a writer added rows to meanwhile.
	for i := range vectorTables {
		ti := (f.table + i) % len(vectorTables)
		rows, err := f.read(ctx, ti, n)
		if err != nil {
			// A switch or an abort between the state read above and this
			// read drops the shadow columns: that is the end of the fill,
			// not a failure (the Job keeps running until the switch).
			if st, serr := ReadState(ctx, f.pool, f.t); serr == nil && st.Phase != PhaseFilling {
				return 0, false, ErrNotFilling
			}
			return 0, false, err
		}
		if len(rows) == 0 {
			continue
		}
		f.table = ti
		f.after[ti] = rows[len(rows)-1].key
		filled, err := f.write(ctx, vectorTables[ti], rows)
		return filled, false, err
	}
	return 0, true, nil
}

// read reads the next rows of table ti without their new vector, after
// the Filler's position in it; past the end, from the start again once
// (rows a writer added or changed behind it).
func (f *Filler) read(ctx context.Context, ti, n int) ([]pending, error) {
	vt := vectorTables[ti]
	keys := strings.Join(vt.key, ", ")
	for range 2 {
		var out []pending
		err := inTx(ctx, f.pool, f.t, false, func(tx pgx.Tx) error {
			args := []any{}
			from := ""
			if f.after[ti] != nil {
				from = ` AND (` + keys + `) > (` + params(1, len(vt.key)) + `)`
				args = append(args, f.after[ti]...)
			}
			rows, err := tx.Query(ctx, `SELECT `+keys+`, `+vt.text+`, md5(`+vt.text+`) FROM `+f.t.table(vt.name)+
				` WHERE embedding_next IS NULL AND embedding IS NOT NULL`+from+` ORDER BY `+keys+` LIMIT `+strconv.Itoa(n), args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				p := pending{key: make([]any, len(vt.key))}
				dest := make([]any, 0, len(vt.key)+2)
				for i := range p.key {
					dest = append(dest, &p.key[i])
				}
				if err := rows.Scan(append(dest, &p.text, &p.md5)...); err != nil {
					return err
				}
				out = append(out, p)
			}
			return rows.Err()
		})
		if err != nil {
			return nil, fmt.Errorf("reading the rows of %s left to re-embed: %w", f.t.table(vt.name), err)
		}
		if len(out) > 0 || f.after[ti] == nil {
			return out, nil
		}
		f.after[ti] = nil
	}
	return nil, nil
}

// write embeds rows and stores their vectors in one transaction, which
// first checks (and locks) the reembed row: a switch or an abort waits for
// it, and it fails once one of them is done.
func (f *Filler) write(ctx context.Context, vt vectorTable, rows []pending) (int64, error) {
	texts := make([]string, len(rows))
	for i, r := range rows {
		texts[i] = r.text
	}
	vecs, err := f.emb.Embed(ctx, texts)
	if err != nil {
		return 0, fmt.Errorf("embedding %d rows of %s with %s: %w", len(rows), f.t.table(vt.name), f.id, err)
	}
	if len(vecs) != len(rows) {
		return 0, fmt.Errorf("embedding with %s: %d vectors for %d texts", f.id, len(vecs), len(rows))
	}
	var filled int64
	err = inTx(ctx, f.pool, f.t, false, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE `+f.t.table("reembed")+` SET updated_at = now()
			WHERE phase = 'filling' AND next_provider = $1 AND next_model = $2 AND next_dimensions = $3`,
			f.id.Provider, f.id.Model, f.id.Dimensions)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFilling
		}
		keys := strings.Join(vt.key, ", ")
		sql := `UPDATE ` + f.t.table(vt.name) + ` SET embedding_next = $1 WHERE embedding_next IS NULL AND md5(` + vt.text +
			`) = $2 AND (` + keys + `) = (` + params(3, len(vt.key)) + `)`
		var b pgx.Batch
		for i, r := range rows {
			if len(vecs[i]) != f.id.Dimensions {
				return fmt.Errorf("embedding with %s: a vector of %d dimensions", f.id, len(vecs[i]))
			}
			b.Queue(sql, append([]any{pgv.NewVector(vecs[i]), r.md5}, r.key...)...)
		}
		res := tx.SendBatch(ctx, &b)
		for range rows {
			tag, err := res.Exec()
			if err != nil {
				_ = res.Close()
				return err
			}
			filled += tag.RowsAffected()
		}
		if err := res.Close(); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE `+f.t.table("reembed")+` SET filled = filled + $1`, filled)
		return err
	})
	if errors.Is(err, ErrNotFilling) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("storing the new vectors of %d rows of %s: %w", len(rows), f.t.table(vt.name), err)
	}
	return filled, nil
}

// params is "$first, ..." for n parameters.
func params(first, n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = "$" + strconv.Itoa(first+i)
	}
	return strings.Join(p, ", ")
}
