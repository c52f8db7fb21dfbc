package tenant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// textLocalVersion is the migration that adds the stored vectors of
// another configuration than English (memories.tsv_local, tsv_config) and
// text_search.next.
const textLocalVersion = 19

// textFillBatch is how many memories one statement of a fill reads: at
// most 100 × maxContentBytes (64 KiB) = 6.4 MiB of text parsed per
// statement, a few seconds on a busy server, and as many rows locked
// against their writers meanwhile.
const textFillBatch = 100

// textFillTimeout bounds one statement of a fill.
const textFillTimeout = 2 * time.Minute

// TextVector is the tsvector (SQL) of a memory's text under config (a valid
// name): English reads the stored tsv column, generated from content by
// migration 1 (so English tenants keep the index and the queries they had);
// any other configuration reads the stored tsv_local of migration 19 when
// the row's tsv_config says it holds that configuration's vector, and
// computes it from content otherwise (a row the fill has not reached, or
// one a service wrote with the previous configuration during a switch).
// The index and the queries use this same expression, so a search under
// German parses no content but that of such rows. alias prefixes the
// columns ("m." or "").
func TextVector(config, alias string) string {
	if config == "" || config == DefaultTextSearchConfig {
		return alias + "tsv"
	}
	return "(CASE WHEN " + alias + "tsv_config = '" + config + "' THEN " + alias + "tsv_local ELSE to_tsvector('" + config + "'::regconfig, " + alias + "content) END)"
}

// fillTextLocal stores every memory's vector under config (not English)
// before the index of config is built on it. It first names config as
// text_search.next, so that services write new and rewritten rows with
// it, then walks the table by id in batches of textFillBatch, each its own
// transaction with lock_timeout and statement_timeout. A row that already
// holds config is left alone: an interrupted fill resumes where rows still
// need it, and a second one only reads.
func fillTextLocal(ctx context.Context, conn *pgx.Conn, schema, owner, config string, lockTimeout time.Duration, res *Result) error {
	table := pgx.Identifier{schema, "memories"}.Sanitize()
	if err := inTx(ctx, conn, owner, func(tx pgx.Tx) error {
		if err := setLocalTimeouts(ctx, tx, lockTimeout); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "text_search"}.Sanitize()+` SET next = $1 WHERE next IS DISTINCT FROM $1 AND config <> $1`, config)
		return err
	}); err != nil {
		return fmt.Errorf("naming %q the text search configuration to write: %w", config, err)
	}
	after, from := "00000000-0000-0000-0000-000000000000", ">=" // the last id of the previous batch
	filled := 0
	for {
		var last *string
		var n int64
		err := inTx(ctx, conn, owner, func(tx pgx.Tx) error {
			if err := setLocalTimeouts(ctx, tx, lockTimeout); err != nil {
				return err
			}
			err := tx.QueryRow(ctx, `SELECT id::text FROM (SELECT id FROM `+table+` WHERE id `+from+` $1::uuid ORDER BY id LIMIT $2) AS b ORDER BY id DESC LIMIT 1`,
				after, textFillBatch).Scan(&last)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // past the last row
			}
			if err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `UPDATE `+table+` SET tsv_config = $1::text, tsv_local = to_tsvector($1::text::regconfig, content)
				WHERE id `+from+` $2::uuid AND id <= $3::uuid AND tsv_config IS DISTINCT FROM $1::text`, config, after, *last)
			n = tag.RowsAffected()
			return err
		})
		if err != nil {
			return fmt.Errorf("storing the %s text vectors of %s: %w", config, table, err)
		}
		if last == nil {
			break
		}
		after, from, filled = *last, ">", filled+int(n)
	}
	if filled > 0 {
		res.Changes = append(res.Changes, fmt.Sprintf("stored the %s text vectors of %d memories", config, filled))
	}
	return nil
}

// setLocalTimeouts bounds the statements of the transaction tx: a fill
// waits for a writer's row lock at most lockTimeout, and parses at most
// textFillTimeout per statement.
func setLocalTimeouts(ctx context.Context, tx pgx.Tx, lockTimeout time.Duration) error {
	_, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d; SET LOCAL statement_timeout = %d",
		lockTimeout.Milliseconds(), textFillTimeout.Milliseconds()))
	return err
}
