package reembed

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// maxDimensions is pgvector's largest vector column (and the CRD's).
const maxDimensions = 16000

// textTriggerTables are the tables whose text the service rewrites in
// place (memories: update and merge; summaries): a rewrite during the fill
// clears the row's new vector (migration 20, reembed_text_changed).
var textTriggerTables = []string{"memories", "summaries"}

// textTrigger is the name of that trigger on a table.
const textTrigger = "reembed_text_changed"

// Begin starts re-embedding the tenant's vectors from the embedder from
// (the one that made them: its dimensions must be the columns') to to. In
// one short transaction as the owner it adds the shadow column
// embedding_next of to's dimensions to every table with an embedding
// (catalog only: no default, no table rewrite), grants the login role
// INSERT and UPDATE on it (the service's dual writes, the fill), puts the text trigger on, and records the re-embed
// (phase filling, filled 0); then it builds the partial index of the rows
// left of each table concurrently (writes go on). Begin again with the same
// embedders resumes: it builds what an interrupted Begin left unbuilt. A
// re-embed to another embedder is ErrBusy until Abort.
func Begin(ctx context.Context, pool *pgxpool.Pool, t Target, from, to Embedder) error {
	if err := checkEmbedder(to); err != nil {
		return err
	}
	if from == to {
		return fmt.Errorf("re-embedding to %s: %w", to, ErrCurrent)
	}
	citus, err := isCitus(ctx, pool)
	if err != nil {
		return err
	}
	if citus {
		return fmt.Errorf("re-embedding %s: %w", t.Schema, ErrCitus)
	}
	ext, dims, err := vectorColumn(ctx, pool, t)
	if err != nil {
		return err
	}
	err = inTx(ctx, pool, t, true, func(tx pgx.Tx) error {
		st, err := readState(ctx, tx, t, "FOR UPDATE")
		if err != nil {
			return err
		}
		if st.Phase == PhaseFilling {
			if st.Next != to || st.Current != from {
				return fmt.Errorf("beginning a re-embed from %s to %s: %w (from %s to %s; abort it first)", from, to, ErrBusy, st.Current, st.Next)
			}
			return nil // resumed: the columns are there
		}
		if from.Dimensions != dims {
			return fmt.Errorf("re-embedding from %s: the vectors of %s have %d dimensions", from, t.Schema, dims)
		}
		if st.Current.Provider != "" && (st.Current.Provider != from.Provider || st.Current.Model != from.Model) {
			return fmt.Errorf("re-embedding from %s: the vectors of %s are %s's", from, t.Schema, st.Current)
		}
		vector := pgx.Identifier{ext, "vector"}.Sanitize() + fmt.Sprintf("(%d)", to.Dimensions)
		for _, vt := range vectorTables {
			stmts := []string{`ALTER TABLE ` + t.table(vt.name) + ` ADD COLUMN embedding_next ` + vector}
			if t.Login != "" {
				// UPDATE for the fill, INSERT for the service's dual writes.
				stmts = append(stmts, `GRANT INSERT (embedding_next), UPDATE (embedding_next) ON `+t.table(vt.name)+` TO `+pgx.Identifier{t.Login}.Sanitize())
			}
			for _, s := range stmts {
				if _, err := tx.Exec(ctx, s); err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
			}
		}
		for _, name := range textTriggerTables {
			s := `CREATE TRIGGER ` + textTrigger + ` BEFORE UPDATE OF ` + textColumn(name) + ` ON ` + t.table(name) +
				` FOR EACH ROW WHEN (NEW.` + textColumn(name) + ` IS DISTINCT FROM OLD.` + textColumn(name) +
				` AND NEW.embedding_next IS NOT DISTINCT FROM OLD.embedding_next) EXECUTE FUNCTION ` + t.table("reembed_text_changed") + `()`
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("putting the text trigger on %s: %w", t.table(name), err)
			}
		}
		_, err = tx.Exec(ctx, `UPDATE `+t.table("reembed")+` SET provider = $1, model = $2, dimensions = $3,
			next_provider = $4, next_model = $5, next_dimensions = $6, phase = 'filling', filled = 0,
			started_at = now(), updated_at = now()`, from.Provider, from.Model, from.Dimensions, to.Provider, to.Model, to.Dimensions)
		return err
	})
	if err != nil {
		return fmt.Errorf("beginning the re-embed of %s: %w", t.Schema, err)
	}
	for _, vt := range vectorTables {
		sql := `CREATE INDEX CONCURRENTLY IF NOT EXISTS ` + todoIndex(vt) + ` ON ` + t.table(vt.name) +
			` (` + strings.Join(vt.key, ", ") + `) WHERE embedding_next IS NULL AND embedding IS NOT NULL`
		if err := buildIndex(ctx, pool, t, todoIndex(vt), sql); err != nil {
			return fmt.Errorf("beginning the re-embed of %s: %w", t.Schema, err)
		}
	}
	return nil
}

// Abort ends the re-embed under way, if any: in one transaction as the
// owner it drops the shadow columns (with their indexes, grants and the
// text trigger) and clears the re-embed; every read and write kept using
// the old vectors all along, so nothing else changes. Shadow objects left
// with no re-embed recorded (a state row changed by hand) are removed all
// the same; with neither, Abort does nothing.
func Abort(ctx context.Context, pool *pgxpool.Pool, t Target) error {
	err := inTx(ctx, pool, t, true, func(tx pgx.Tx) error {
		st, err := readState(ctx, tx, t, "FOR UPDATE")
		if err != nil {
			return err
		}
		if st.Phase != PhaseFilling {
			if left, err := shadowLeft(ctx, tx, t); err != nil || !left {
				return err
			}
		}
		for _, name := range textTriggerTables {
			if _, err := tx.Exec(ctx, `DROP TRIGGER IF EXISTS `+textTrigger+` ON `+t.table(name)); err != nil {
				return fmt.Errorf("dropping the text trigger of %s: %w", t.table(name), err)
			}
		}
		for _, vt := range vectorTables {
			if _, err := tx.Exec(ctx, `ALTER TABLE `+t.table(vt.name)+` DROP COLUMN IF EXISTS embedding_next`); err != nil {
				return fmt.Errorf("dropping %s.embedding_next: %w", t.table(vt.name), err)
			}
		}
		_, err = tx.Exec(ctx, `UPDATE `+t.table("reembed")+` SET next_provider = NULL, next_model = NULL,
			next_dimensions = NULL, phase = 'idle', filled = 0, started_at = NULL, updated_at = now()`)
		return err
	})
	if err != nil {
		return fmt.Errorf("aborting the re-embed of %s: %w", t.Schema, err)
	}
	return nil
}

// shadowLeft reports whether a shadow column or the text trigger of a
// re-embed is on any of the tenant's tables.
func shadowLeft(ctx context.Context, tx pgx.Tx, t Target) (bool, error) {
	tables := make([]string, 0, len(vectorTables))
	for _, vt := range vectorTables {
		tables = append(tables, t.table(vt.name))
	}
	var left bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
			WHERE attrelid IN (SELECT to_regclass(n) FROM unnest($1::text[]) AS n) AND attname = 'embedding_next' AND NOT attisdropped)
		OR EXISTS (SELECT 1 FROM pg_catalog.pg_trigger
			WHERE tgrelid IN (SELECT to_regclass(n) FROM unnest($1::text[]) AS n) AND tgname = $2)`, tables, textTrigger).Scan(&left)
	if err != nil {
		return false, fmt.Errorf("looking for what a re-embed left on %s: %w", t.Schema, err)
	}
	return left, nil
}

func checkEmbedder(e Embedder) error {
	if e.Provider == "" || e.Model == "" {
		return fmt.Errorf("re-embedding to %s: the embedder needs a provider and a model", e)
	}
	if e.Dimensions < 1 || e.Dimensions > maxDimensions {
		return fmt.Errorf("re-embedding to %s: dimensions must be 1..%d", e, maxDimensions)
	}
	return nil
}

// textColumn is the column a table's vector is made of.
func textColumn(table string) string {
	for _, vt := range vectorTables {
		if vt.name == table {
			return vt.text
		}
	}
	panic("reembed: no vector table " + table)
}

// vectorColumn reads the schema of pgvector's type and the dimensions of
// memories.embedding.
func vectorColumn(ctx context.Context, pool *pgxpool.Pool, t Target) (string, int, error) {
	var ext string
	var dims int
	err := pool.QueryRow(ctx, `SELECT n.nspname, a.atttypmod FROM pg_catalog.pg_attribute a
		JOIN pg_catalog.pg_type ty ON ty.oid = a.atttypid JOIN pg_catalog.pg_namespace n ON n.oid = ty.typnamespace
		WHERE a.attrelid = to_regclass($1) AND a.attname = 'embedding' AND NOT a.attisdropped`, t.table("memories")).Scan(&ext, &dims)
	if err != nil {
		return "", 0, fmt.Errorf("reading the vector column of %s: %w", t.table("memories"), err)
	}
	return ext, dims, nil
}

// buildIndex runs sql, a CREATE INDEX CONCURRENTLY IF NOT EXISTS of name,
// as the owner on a session of its own (no transaction may hold it), after
// dropping an invalid index of that name an interrupted build left. The
// session is closed afterwards, so its role and timeouts never go back to
// the pool.
func buildIndex(ctx context.Context, pool *pgxpool.Pool, t Target, name, sql string) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("building %s: %w", name, err)
	}
	conn := c.Hijack()
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	lock, _, index := t.timeouts()
	set := fmt.Sprintf("SET lock_timeout = %d; SET statement_timeout = %d", lock.Milliseconds(), index.Milliseconds())
	if t.Owner != "" {
		set += "; SET ROLE " + pgx.Identifier{t.Owner}.Sanitize()
	}
	if _, err := conn.Exec(ctx, set); err != nil {
		return fmt.Errorf("building %s: %w", name, err)
	}
	var invalid bool
	err = conn.QueryRow(ctx, `SELECT NOT i.indisvalid FROM pg_catalog.pg_index i
		WHERE i.indexrelid = to_regclass($1)`, t.table(name)).Scan(&invalid)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("building %s: %w", name, err)
	}
	if invalid {
		if _, err := conn.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+t.table(name)); err != nil {
			return fmt.Errorf("dropping the invalid index %s: %w", name, err)
		}
	}
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("building %s: %w", name, err)
	}
	return nil
}
