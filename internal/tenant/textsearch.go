package tenant

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
)

// textSearchVersion is the migration that creates the text_search table.
const textSearchVersion = 18

// DefaultTextSearchConfig is the configuration of a tenant whose policy
// names none, and of every tenant before migration 18: the generated tsv
// columns hold English vectors.
const DefaultTextSearchConfig = "english"

// TextSearchGrace is how long the index of the previous configuration stays
// after the switch: longer than the service keeps the configuration it read
// (core.TextSearchTTL), so no search runs with a configuration whose index
// is already gone.
const TextSearchGrace = 3 * time.Second

// textConfigName is what a configuration name may look like: it becomes
// part of SQL text (an index expression, and the queries that must repeat
// it to use the index), so nothing else ever gets there. The policy allows
// fewer (the configurations PostgreSQL ships, memory/policy).
var textConfigName = regexp.MustCompile(`^[a-z]{1,32}$`)

// ValidTextConfigName reports whether name may be put into SQL as a
// text search configuration.
func ValidTextConfigName(name string) bool { return textConfigName.MatchString(name) }

// textIndexPrefix starts the name of every text index of memories but
// English's, which keeps the name migration 12 gave it. "stored" names the
// indexes over the stored vectors of migration 19 whose fallback parses a
// bounded start of the content (TextVector); the indexes that came before
// (memories_owner_text_<config>_idx over to_tsvector(config, content), and
// memories_owner_text_local_<config>_idx, whose fallback parsed the whole
// content) are dropped like any other configuration's, once the new one is
// built: an index is found by its name, so a changed expression needs a
// new name.
const textIndexPrefix = "memories_owner_text_stored_"

// TextIndexName is the name of the text index of memories built with config.
func TextIndexName(config string) string {
	if config == DefaultTextSearchConfig {
		return "memories_owner_text_idx"
	}
	return textIndexPrefix + config + "_idx"
}

// OwnerText is the indexed expression of the owner's text index of memories
// (migration 12) under config: the row's words plus one lexeme naming its
// owner (internal/memory/ownertext.go says why).
func OwnerText(config, alias string) string {
	return "(" + TextVector(config, alias) + " || array_to_tsvector(ARRAY['owner ' || md5(" + alias + "owner_id)]))"
}

// ensureTextSearch gives the tenant the text index of spec's configuration
// and then makes it the one searches use: for another configuration than
// English, the stored vectors of the rows are filled first
// (fillTextLocal), then the new index is built concurrently (adds and
// searches go on, on the old configuration), the text_search row is
// switched once it is valid, and the other configurations' indexes are
// dropped concurrently TextSearchGrace after the switch. A pass that finds
// everything in place only reads; an empty configuration keeps the
// tenant's as it is. created says that this pass created the text_search
// row: no service has read it yet, so the previous index goes at once.
func ensureTextSearch(ctx context.Context, conn *pgx.Conn, spec Spec, names roleNames, lockTimeout time.Duration, created bool, res *Result) error {
	want := spec.TextSearchConfig
	if want == "" {
		return nil // keep the tenant's
	}
	if err := checkTextConfig(ctx, conn, want); err != nil {
		return err
	}
	local := want != DefaultTextSearchConfig
	if local && res.Version < textLocalVersion {
		return fmt.Errorf("text search configuration %q needs migration %d (the schema is at %d)", want, textLocalVersion, res.Version)
	}
	indexes, err := textIndexes(ctx, conn, spec.Schema)
	if err != nil {
		return err
	}
	name := TextIndexName(want)
	valid, ok := indexes[name]
	build := !ok || !valid
	row, err := readTextSearch(ctx, conn, spec.Schema)
	if err != nil {
		return err
	}
	// The rows get config's vectors before searches switch to it, also when
	// its index is still there (a switch back within the grace, before the
	// pass that drops it): else every row written under the other
	// configuration meanwhile would take the fallback parse until the fill
	// after the grace.
	if local && (build || row.active != want) {
		if err := fillTextLocal(ctx, conn, spec.Schema, names.owner, want, lockTimeout, res); err != nil {
			return err
		}
	}
	if build {
		if err := migrateConcurrent(ctx, conn, names.owner, spec.Schema, textIndexSQL(spec.Schema, want), spec.IndexTimeout, lockTimeout); err != nil {
			return fmt.Errorf("building the %s text index: %w", want, err)
		}
		res.Changes = append(res.Changes, "built the text index "+name)
	}
	wait, unfinished, err := switchTextSearch(ctx, conn, spec.Schema, names.owner, want, local, res)
	if err != nil {
		return err
	}
	delete(indexes, name)
	refill := local && (build || unfinished)
	if (len(indexes) > 0 || refill) && !created {
		if err := sleepCtx(ctx, wait); err != nil {
			return err
		}
	}
	for other := range indexes {
		drop := "DROP INDEX CONCURRENTLY IF EXISTS " + pgx.Identifier{spec.Schema, other}.Sanitize()
		if err := migrateConcurrent(ctx, conn, names.owner, spec.Schema, drop, spec.IndexTimeout, lockTimeout); err != nil {
			return fmt.Errorf("dropping the text index %s: %w", other, err)
		}
		res.Changes = append(res.Changes, "dropped the text index "+other)
	}
	if refill {
		// A service that read the configuration before the fill began may
		// have written a row with the previous one after the fill passed
		// it; past the grace it reads the new one. So may a fill of another
		// configuration that the policy abandoned before its switch. Such
		// a row is matched right (its vector is computed from content) but
		// costs a parse per search until this pass stores its vector.
		if err := fillTextLocal(ctx, conn, spec.Schema, names.owner, want, lockTimeout, res); err != nil {
			return err
		}
		return endTextFill(ctx, conn, spec.Schema, names.owner, want)
	}
	return nil
}

// endTextFill clears text_search.next once the fill that follows a switch
// to config is done: until then a pass that finds next set fills again, so
// an operator stopped during the grace or the fill leaves no row of the
// previous configuration for good.
func endTextFill(ctx context.Context, conn *pgx.Conn, schema, owner, config string) error {
	table := pgx.Identifier{schema, "text_search"}.Sanitize()
	if err := inTx(ctx, conn, owner, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE `+table+` SET next = NULL WHERE next = $1 AND config = $1`, config)
		return err
	}); err != nil {
		return fmt.Errorf("ending the %s fill of %s: %w", config, table, err)
	}
	return nil
}

// checkTextConfig refuses a name that is not a configuration of this
// database.
func checkTextConfig(ctx context.Context, conn *pgx.Conn, want string) error {
	if !ValidTextConfigName(want) {
		return fmt.Errorf("text search configuration %q: not a configuration name", want)
	}
	var known bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_ts_config WHERE cfgname = $1)`, want).Scan(&known); err != nil {
		return fmt.Errorf("checking text search configuration %q: %w", want, err)
	}
	if !known {
		return fmt.Errorf("text search configuration %q does not exist in this database", want)
	}
	return nil
}

// textIndexSQL builds the text index of memories under config, like
// migration 12 (partial on searchable rows, no pending list).
func textIndexSQL(schema, config string) string {
	return "CREATE INDEX CONCURRENTLY IF NOT EXISTS " + TextIndexName(config) + " ON " + pgx.Identifier{schema, "memories"}.Sanitize() +
		" USING gin (" + OwnerText(config, "") + ") WITH (fastupdate = off) WHERE active AND superseded_by IS NULL"
}

// textIndexes are the text indexes of memories in schema, by name, with
// whether each is valid (an interrupted build leaves an invalid one).
func textIndexes(ctx context.Context, conn *pgx.Conn, schema string) (map[string]bool, error) {
	rows, err := conn.Query(ctx, `SELECT c.relname, i.indisvalid FROM pg_catalog.pg_index i
		JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = to_regclass($1) AND (c.relname = $2 OR c.relname LIKE $3)`,
		pgx.Identifier{schema, "memories"}.Sanitize(), TextIndexName(DefaultTextSearchConfig), `memories\_owner\_text\_%\_idx`)
	if err != nil {
		return nil, fmt.Errorf("listing the text indexes of %q: %w", schema, err)
	}
	out := map[string]bool{}
	var name string
	var valid bool
	_, err = pgx.ForEachRow(rows, []any{&name, &valid}, func() error {
		out[name] = valid
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the text indexes of %q: %w", schema, err)
	}
	return out, nil
}

// textSearchRow is the tenant's text_search row: the configuration
// searches use, the one writes store when a fill has not ended (next), and
// how long the grace of the last switch still runs.
type textSearchRow struct {
	active string
	next   *string
	left   time.Duration
}

// readTextSearch reads the text_search row of schema.
func readTextSearch(ctx context.Context, conn *pgx.Conn, schema string) (textSearchRow, error) {
	table := pgx.Identifier{schema, "text_search"}.Sanitize()
	var row textSearchRow
	var left float64
	// to_jsonb reads next on a schema older than migration 19 too (an
	// English tenant's schema may stay at 18: provisionTo).
	err := conn.QueryRow(ctx, `SELECT config, to_jsonb(t)->>'next', greatest(0, extract(epoch FROM switched_at + make_interval(secs => $1) - now()))::float8 FROM `+table+` AS t`,
		TextSearchGrace.Seconds()).Scan(&row.active, &row.next, &left)
	if errors.Is(err, pgx.ErrNoRows) {
		return row, fmt.Errorf("reading %s: the row is missing", table)
	}
	if err != nil {
		return row, fmt.Errorf("reading %s: %w", table, err)
	}
	row.left = time.Duration(left * float64(time.Second))
	return row, nil
}

// switchTextSearch makes config the one searches use, if it is not yet,
// and names it the one writes store (next) when it is not English (local):
// the fill after the grace ends that (endTextFill). It returns how long to
// wait before the previous index may go and whether a fill was unfinished
// (another configuration's the policy abandoned, whose rows need config's
// again, or config's own that a stopped pass left): the rows need a fill.
func switchTextSearch(ctx context.Context, conn *pgx.Conn, schema, owner, config string, local bool, res *Result) (time.Duration, bool, error) {
	row, err := readTextSearch(ctx, conn, schema)
	if err != nil {
		return 0, false, err
	}
	// next names a fill not yet ended: one running, one the policy
	// abandoned (another configuration), or the one after a switch to
	// config that a stopped pass left (endTextFill clears it).
	unfinished := row.next != nil
	if row.active == config && (!unfinished || *row.next == config) {
		return row.left, unfinished, nil
	}
	// A fill the policy abandoned ends like a switch: a service that read
	// its next writes rows with it for up to core.TextSearchTTL more, so
	// the fill that brings them back to config waits the grace too.
	set := `config = $1, switched_at = now()`
	if local {
		set += `, next = $1` // until the fill after the grace ends
	} else if unfinished {
		set += `, next = NULL`
	}
	table := pgx.Identifier{schema, "text_search"}.Sanitize()
	if err := inTx(ctx, conn, owner, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE `+table+` SET `+set, config)
		return err
	}); err != nil {
		return 0, false, fmt.Errorf("switching %s to %q: %w", table, config, err)
	}
	if row.active == config {
		res.Changes = append(res.Changes, fmt.Sprintf("ended the abandoned %s fill of text search %s", *row.next, config))
	} else {
		res.Changes = append(res.Changes, fmt.Sprintf("switched text search from %s to %s", row.active, config))
		res.TextSearchSwitched = true
	}
	return TextSearchGrace, unfinished, nil
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
