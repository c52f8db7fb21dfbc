package reembed

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ownerVectorsMaxDims mirrors tenant.OwnerVectorsMaxDims (a test pins it):
// memories_active_vectors_idx, the covering index of migration 12, exists
// for vectors up to this size only.
const ownerVectorsMaxDims = 576

// Covering indexes of memories (migration 12) and the one built on the
// shadow column before a switch to at most ownerVectorsMaxDims dimensions.
const (
	coveringIndex     = "memories_active_vectors_idx"
	coveringNextIndex = "memories_active_vectors_next_idx"
	inactiveIndex     = "memories_inactive_owner_idx"
)

// betweenProgressReads, when set (by a test only), runs between
// ReadProgress's two reads: the seam a test commits a fill in.
var betweenProgressReads func()

// Progress is how far the re-embed under way is.
type Progress struct {
	State
	// Left counts, by table, the rows that have a vector but not yet their
	// new one; LeftTotal is their sum. Zero when no re-embed is under way.
	Left      map[string]int64
	LeftTotal int64
}

// ReadProgress reads the re-embed state and counts the rows left (through
// the partial indexes Begin built: no table is scanned).
//
// Both reads see one snapshot (a read-only REPEATABLE READ transaction):
// under READ COMMITTED each statement had its own, and a fill committing
// between them was counted in neither the counter (read before it) nor the
// rows left (counted after it), so the operator once saw nothing left and
// nothing filled and took the wrong path.
func ReadProgress(ctx context.Context, pool *pgxpool.Pool, t Target) (Progress, error) {
	var p Progress
	err := inSnapshot(ctx, pool, t, func(tx pgx.Tx) error {
		var err error
		if p.State, err = readState(ctx, tx, t, ""); err != nil || p.Phase != PhaseFilling {
			return err
		}
		if betweenProgressReads != nil {
			betweenProgressReads()
		}
		p.Left, p.LeftTotal, err = countLeft(ctx, tx, t)
		return err
	})
	if err != nil {
		return p, fmt.Errorf("reading the re-embed progress of %s: %w", t.Schema, err)
	}
	return p, nil
}

func countLeft(ctx context.Context, tx pgx.Tx, t Target) (map[string]int64, int64, error) {
	left := map[string]int64{}
	var total int64
	for _, vt := range vectorTables {
		var n int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+t.table(vt.name)+
			` WHERE embedding_next IS NULL AND embedding IS NOT NULL`).Scan(&n); err != nil {
			return nil, 0, fmt.Errorf("counting the rows of %s left: %w", t.table(vt.name), err)
		}
		left[vt.name] = n
		total += n
	}
	return left, total, nil
}

// Switch makes the new vectors the tenant's, once every row has one
// (ErrRowsLeft before). For new vectors that fit the covering index of
// memories it first builds that index on the shadow column concurrently
// (writes go on); then, in one transaction as the owner, it locks the four
// tables, counts again that no row is left, drops the old embedding
// columns (with their indexes), renames the shadow columns embedding (and
// the new covering index), makes memories.embedding NOT NULL again, and
// records the new embedder as the current one. A reader sees the old
// vectors before the commit and the new ones after, never a mix. Switch
// again after an interruption resumes.
func Switch(ctx context.Context, pool *pgxpool.Pool, t Target) error {
	p, err := ReadProgress(ctx, pool, t)
	if err != nil {
		return err
	}
	if p.Phase != PhaseFilling {
		return fmt.Errorf("switching %s: %w", t.Schema, ErrNotFilling)
	}
	if p.LeftTotal > 0 {
		return fmt.Errorf("switching %s to %s: %w: %d (%v)", t.Schema, p.Next, ErrRowsLeft, p.LeftTotal, p.Left)
	}
	covering := p.Next.Dimensions <= ownerVectorsMaxDims
	if covering {
		memories := t.table("memories")
		if err := buildIndex(ctx, pool, t, coveringNextIndex, `CREATE INDEX CONCURRENTLY IF NOT EXISTS `+coveringNextIndex+` ON `+memories+
			` (owner_id, md5(content)) INCLUDE (embedding_next, id, expires_at) WHERE active AND superseded_by IS NULL`); err != nil {
			return fmt.Errorf("switching %s: %w", t.Schema, err)
		}
		if err := buildIndex(ctx, pool, t, inactiveIndex, `CREATE INDEX CONCURRENTLY IF NOT EXISTS `+inactiveIndex+` ON `+memories+
			` (owner_id, deactivated_at) WHERE deactivated_at IS NOT NULL AND superseded_by IS NULL`); err != nil {
			return fmt.Errorf("switching %s: %w", t.Schema, err)
		}
	}
	err = inTx(ctx, pool, t, true, func(tx pgx.Tx) error {
		st, err := readState(ctx, tx, t, "FOR UPDATE")
		if err != nil {
			return err
		}
		if st.Phase != PhaseFilling || st.Next != p.Next {
			return ErrNotFilling // aborted, or switched, meanwhile
		}
		for _, vt := range vectorTables {
			if _, err := tx.Exec(ctx, `LOCK TABLE `+t.table(vt.name)+` IN ACCESS EXCLUSIVE MODE`); err != nil {
				return fmt.Errorf("locking %s: %w", t.table(vt.name), err)
			}
		}
		left, total, err := countLeft(ctx, tx, t)
		if err != nil {
			return err
		}
		if total > 0 {
			return fmt.Errorf("%w: %d (%v), written since the count before the lock", ErrRowsLeft, total, left)
		}
		return swapColumns(ctx, tx, t, st.Next, covering)
	})
	if err != nil {
		return fmt.Errorf("switching %s to %s: %w", t.Schema, p.Next, err)
	}
	return nil
}

// swapColumns is the DDL of Switch, inside its transaction.
func swapColumns(ctx context.Context, tx pgx.Tx, t Target, next Embedder, covering bool) error {
	var stmts []string
	for _, name := range textTriggerTables {
		stmts = append(stmts, `DROP TRIGGER IF EXISTS `+textTrigger+` ON `+t.table(name))
	}
	for _, vt := range vectorTables {
		table := t.table(vt.name)
		stmts = append(stmts,
			// The guard of an earlier switch depends on the column (its WHEN
			// and UPDATE OF name it): PostgreSQL refuses the drop while it
			// is there. installGuard puts it back on the new column.
			`DROP TRIGGER IF EXISTS `+guardTrigger+` ON `+table,
			`ALTER TABLE `+table+` DROP COLUMN embedding`, // with its covering and todo indexes
			`ALTER TABLE `+table+` RENAME COLUMN embedding_next TO embedding`)
		if t.Login != "" {
			// The column grants were the fill's and the dual writes' only;
			// the login role keeps its table privileges.
			stmts = append(stmts, `REVOKE INSERT (embedding), UPDATE (embedding) ON `+table+` FROM `+pgx.Identifier{t.Login}.Sanitize())
		}
		if vt.notNull {
			// A scan under the lock: the counts above just proved it holds.
			stmts = append(stmts, `ALTER TABLE `+table+` ALTER COLUMN embedding SET NOT NULL`)
		}
	}
	if covering {
		stmts = append(stmts, `ALTER INDEX `+t.table(coveringNextIndex)+` RENAME TO `+coveringIndex)
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	if err := installGuard(ctx, tx, t, next); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE `+t.table("reembed")+` SET provider = next_provider, model = next_model,
		dimensions = next_dimensions, next_provider = NULL, next_model = NULL, next_dimensions = NULL,
		phase = 'idle', switched_at = now(), updated_at = now()`)
	if err != nil {
		return fmt.Errorf("recording the switch to %s: %w", next, err)
	}
	return nil
}

// guardTrigger refuses, on every table with an embedding, a vector written
// by a session that names another embedder than the tenant's (its
// engram.embedder, pg.SessionSettings.Embedder): a service pod still
// running the old embedder after the switch would otherwise write
// old-model vectors into the swapped column, silently when the dimensions
// are the same. Put on (or renamed to the new embedder) by Switch, in its
// transaction; a session without the setting (an administrator, a pod of
// an earlier release) is not checked.
const guardTrigger = "reembed_guard"

// GuardSQLState is the SQLSTATE the guard raises (pg.SQLStateWrongEmbedder).
const GuardSQLState = "EG029"

func installGuard(ctx context.Context, tx pgx.Tx, t Target, current Embedder) error {
	fn := t.table("reembed_guard")
	stmts := []string{
		`SET LOCAL standard_conforming_strings = on`,
		`CREATE OR REPLACE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $guard$
DECLARE s text := current_setting('engram.embedder', true);
BEGIN
	IF s IS NOT NULL AND s <> '' AND s <> TG_ARGV[0] THEN
		RAISE EXCEPTION 'this session embeds with %, but the vectors of %.% are %''s since a re-embed', s, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[0]
			USING ERRCODE = '` + GuardSQLState + `', HINT = 'a pod of the old embedder: retry, the rollout replaces it';
	END IF;
	RETURN NEW;
END $guard$`,
	}
	name := `'` + strings.ReplaceAll(current.String(), `'`, `''`) + `'`
	for _, vt := range vectorTables {
		table := t.table(vt.name)
		stmts = append(stmts, `DROP TRIGGER IF EXISTS `+guardTrigger+` ON `+table,
			`CREATE TRIGGER `+guardTrigger+` BEFORE INSERT OR UPDATE OF embedding ON `+table+
				` FOR EACH ROW WHEN (NEW.embedding IS NOT NULL) EXECUTE FUNCTION `+fn+`(`+name+`)`)
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("putting the embedder guard on %s: %w", t.Schema, err)
		}
	}
	return nil
}
