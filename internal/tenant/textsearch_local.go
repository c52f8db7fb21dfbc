package tenant

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// textLocalVersion is the migration that adds the stored vectors of
// another configuration than English (memories.tsv_local, tsv_config) and
// text_search.next.
const textLocalVersion = 19

// textFillBatch is how many rows one statement of a fill reads: at most
// 100 × 64 KiB (maxContentBytes, maxMessageBytes) = 6.4 MiB of text parsed
// per statement, a few seconds on a busy server, and as many rows locked
// against their writers meanwhile.
const textFillBatch = 100

// textFillTimeout bounds one statement of a fill.
const textFillTimeout = 2 * time.Minute

// TextVector is the tsvector (SQL) of a memory's text under config (a valid
// name): English reads the stored tsv column, generated from content by
// migration 1 (so English tenants keep the index and the queries they had);
// any other configuration reads the stored tsv_local of migration 19 when
// the row's tsv_config says it holds that configuration's vector, and
// computes it from the content's first textPrefixChars characters
// otherwise (a row the fill has not reached, one a service wrote with the
// previous configuration during a switch, or one a switch to another
// configuration has already filled). The index and the queries use this
// same expression, so a search under German parses no content but a
// bounded start of such rows. alias prefixes the columns ("m." or "").
func TextVector(config, alias string) string {
	if config == "" || config == DefaultTextSearchConfig {
		return alias + "tsv"
	}
	return "(CASE WHEN " + alias + "tsv_config = '" + config + "' THEN " + alias + "tsv_local ELSE to_tsvector('" + config +
		"'::regconfig, left(" + alias + "content, " + strconv.Itoa(textPrefixChars) + ")) END)"
}

// textPrefixChars is how many characters of a memory's content the index
// and the searches parse for a row whose stored vector is of another
// configuration (core.TextPrefixChars, which must be equal): a switch
// between two configurations other than English fills rows with the new
// one while searches still use the old.
const textPrefixChars = 2048

// textTable is a table whose rows store their vector under a non-English
// configuration (migration 19): its text column, and the columns of its
// primary key, which a fill walks it by.
type textTable struct {
	name, column string
	key          []string
}

// textTables are the tables of migration 19, memories first: its index is
// built on the stored vectors, the others are read by owner.
var textTables = []textTable{
	{"memories", "content", []string{"id"}},
	{"messages", "content", []string{"owner_id", "session_id", "seq"}},
	{"summaries", "content", []string{"id"}},
	{"episodes", "summary", []string{"id"}},
}

// fillTextLocal stores every row's vector under config (not English) in
// textTables before the index of config is built on it. It first names
// config as text_search.next, so that services write new rows with it,
// then walks each table by its key in batches of textFillBatch, each its
// own transaction with lock_timeout and statement_timeout. A row that
// already holds config is left alone: an interrupted fill resumes where
// rows still need it, and a second one only reads.
func fillTextLocal(ctx context.Context, conn *pgx.Conn, schema, owner, config string, lockTimeout time.Duration, res *Result) error {
	if err := inTx(ctx, conn, owner, func(tx pgx.Tx) error {
		if err := setLocalTimeouts(ctx, tx, lockTimeout); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "text_search"}.Sanitize()+` SET next = $1 WHERE next IS DISTINCT FROM $1 AND config <> $1`, config)
		return err
	}); err != nil {
		return fmt.Errorf("naming %q the text search configuration to write: %w", config, err)
	}
	for _, t := range textTables {
		filled, err := fillTable(ctx, conn, schema, owner, config, t, lockTimeout)
		if err != nil {
			return fmt.Errorf("storing the %s text vectors of %s: %w", config, pgx.Identifier{schema, t.name}.Sanitize(), err)
		}
		if filled > 0 {
			res.Changes = append(res.Changes, fmt.Sprintf("stored the %s text vectors of %d %s", config, filled, t.name))
		}
	}
	return nil
}

// fillTable stores the vectors of t's rows under config, batch by batch,
// and returns how many rows it wrote.
func fillTable(ctx context.Context, conn *pgx.Conn, schema, owner, config string, t textTable, lockTimeout time.Duration) (int64, error) {
	table := pgx.Identifier{schema, t.name}.Sanitize()
	keys := strings.Join(t.key, ", ")
	var after []any // the key of the previous batch's last row
	var filled int64
	for {
		var last []any
		err := inTx(ctx, conn, owner, func(tx pgx.Tx) error {
			if err := setLocalTimeouts(ctx, tx, lockTimeout); err != nil {
				return err
			}
			from, args := "", []any{config}
			if after != nil {
				from = ` AND (` + keys + `) > (` + placeholders(2, len(after)) + `)`
				args = append(args, after...)
			}
			end := make([]any, len(t.key))
			ptrs := make([]any, len(end))
			for i := range end {
				ptrs[i] = &end[i]
			}
			err := tx.QueryRow(ctx, `SELECT `+keys+` FROM (SELECT `+keys+` FROM `+table+` WHERE $1::text IS NOT NULL`+from+
				` ORDER BY `+keys+` LIMIT `+strconv.Itoa(textFillBatch)+`) AS b ORDER BY `+descending(t.key)+` LIMIT 1`, args...).Scan(ptrs...)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // past the last row
			}
			if err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `UPDATE `+table+` SET tsv_config = $1::text, tsv_local = to_tsvector($1::text::regconfig, `+t.column+`)
				WHERE tsv_config IS DISTINCT FROM $1::text`+from+` AND (`+keys+`) <= (`+placeholders(len(args)+1, len(end))+`)`, append(args, end...)...)
			filled += tag.RowsAffected()
			last = end
			return err
		})
		if err != nil || last == nil {
			return filled, err
		}
		after = last
	}
}

// placeholders is "$first, ..." for n parameters.
func placeholders(first, n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = "$" + strconv.Itoa(first+i)
	}
	return strings.Join(p, ", ")
}

// descending is the ORDER BY of cols, each descending.
func descending(cols []string) string {
	return strings.Join(cols, " DESC, ") + " DESC"
}

// setLocalTimeouts bounds the statements of the transaction tx: a fill
// waits for a writer's row lock at most lockTimeout, and parses at most
// textFillTimeout per statement.
func setLocalTimeouts(ctx context.Context, tx pgx.Tx, lockTimeout time.Duration) error {
	_, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d; SET LOCAL statement_timeout = %d",
		lockTimeout.Milliseconds(), textFillTimeout.Milliseconds()))
	return err
}
