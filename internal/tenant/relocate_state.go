package tenant

// The bookkeeping of a move to another server (relocate.go) and the
// catalog it copies by. The bookkeeping lives on the target, in
// ControlSchema (only the admin may read or write it), keyed by schema:
//
//   - relocate_state: what Prepare took off the target (secondary indexes,
//     foreign keys, with their definitions) for Copy and Finish to put
//     back; the copy cursor of each table ("cursor", the last key copied);
//     which tables are fully copied ("copied"); "prepared"; the horizon of
//     each table's last catch-up pass ("horizon": the xmin of the
//     source's snapshot, the next pass scans only rows at or after it).
//   - relocate_rows: the row map, one row per copied source row: its
//     primary key (jsonb text) and the source's xmin of the copied version.
//     Written in the same transaction as the rows it describes.
//   - relocate_scan: a catch-up pass's list of the source's (key, xmin),
//     compared with the row map in SQL (unlogged: rebuilt by every pass).
//
// Finish and DropIncoming delete the schema's rows of all three.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Timeouts of a move's sessions (each transaction sets them: the pools'
// own may be longer or shorter).
const (
	relocateLockTimeout = 5 * time.Second
	relocateStmtTimeout = 2 * time.Minute
	// relocateChunk is the default number of rows per copy chunk.
	relocateChunk = 5000
	// relocateIndexMemory is the maintenance_work_mem of the index builds
	// after the bulk copy (an HNSW build that fits in memory is several
	// times faster).
	relocateIndexMemory = "256MB"
)

func relocTable(name string) string { return pgx.Identifier{ControlSchema, name}.Sanitize() }

// relocTx runs fn in a transaction on conn with the move's timeouts and a
// synchronous commit; readOnly sources run REPEATABLE READ (one snapshot
// for every table they read).
func relocTx(ctx context.Context, conn *pgx.Conn, readOnly bool, stmt time.Duration, fn func(pgx.Tx) error) error {
	opts := pgx.TxOptions{}
	if readOnly {
		opts = pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	}
	tx, err := conn.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d; SET LOCAL statement_timeout = %d; SET LOCAL synchronous_commit = on",
		relocateLockTimeout.Milliseconds(), stmt.Milliseconds())); err != nil {
		return fmt.Errorf("setting the move's timeouts: %w", err)
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

// ensureRelocateTables creates the bookkeeping tables once (a concurrent
// move of another schema may create them at the same moment: look again).
func ensureRelocateTables(ctx context.Context, conn *pgx.Conn) error {
	stmts := []string{
		"CREATE TABLE IF NOT EXISTS " + relocTable("relocate_state") +
			" (schema_name text, kind text, name text, def text NOT NULL DEFAULT '', PRIMARY KEY (schema_name, kind, name))",
		"CREATE TABLE IF NOT EXISTS " + relocTable("relocate_rows") +
			" (schema_name text, tbl text, pk text, src_xmin text NOT NULL, PRIMARY KEY (schema_name, tbl, pk))",
		// schema_name and tbl come from the target's session, not from
		// the source's COPY stream (a source may be a server the tenant runs).
		"CREATE UNLOGGED TABLE IF NOT EXISTS " + relocTable("relocate_scan") +
			" (schema_name text NOT NULL DEFAULT current_setting('engram.relocate_schema'), " +
			"tbl text NOT NULL DEFAULT current_setting('engram.relocate_table'), pk text NOT NULL, src_xmin text NOT NULL)",
	}
	var err error
	for range controlSchemaAttempts {
		err = relocTx(ctx, conn, false, relocateStmtTimeout, func(tx pgx.Tx) error {
			for _, s := range stmts {
				if _, err := tx.Exec(ctx, s); err != nil {
					return err
				}
			}
			return nil
		})
		var pgErr *pgconn.PgError
		if err == nil || !(errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "42P07")) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("creating the move's bookkeeping in %s: %w", ControlSchema, err)
	}
	return nil
}

// relocCol is one column of a tenant table.
type relocCol struct {
	name      string
	typ       string // format_type: the cast of a key value
	typname   string // pg_type name and typmod: what two servers compare
	typmod    int32
	generated bool
	identity  bool
	send      string // typsend of pgvector's types (Verify hashes their binary form)
}

// relocTab is one tenant table: its columns by name and its primary key
// in key order.
type relocTab struct {
	name string
	cols []relocCol
	pk   []relocCol
}

func (t relocTab) ident(schema string) string { return pgx.Identifier{schema, t.name}.Sanitize() }

// copyCols are the columns a copy writes (generated ones are computed).
func (t relocTab) copyCols() []string {
	var out []string
	for _, c := range t.cols {
		if !c.generated {
			out = append(out, pgx.Identifier{c.name}.Sanitize())
		}
	}
	return out
}

// keyExpr is the row's key as jsonb text, the row map's pk.
func (t relocTab) keyExpr() string {
	parts := make([]string, len(t.pk))
	for i, c := range t.pk {
		parts[i] = pgx.Identifier{c.name}.Sanitize()
	}
	return "jsonb_build_array(" + strings.Join(parts, ", ") + ")::text"
}

// pkRow is the primary key as a row, in index order.
func (t relocTab) pkRow() string {
	parts := make([]string, len(t.pk))
	for i, c := range t.pk {
		parts[i] = pgx.Identifier{c.name}.Sanitize()
	}
	return "ROW(" + strings.Join(parts, ", ") + ")"
}

// keyFields casts the elements of jsonb key expression j back to the pk's
// types.
func (t relocTab) keyFields(j string) string {
	parts := make([]string, len(t.pk))
	for i, c := range t.pk {
		parts[i] = fmt.Sprintf("(%s->>%d)::%s", j, i, c.typ)
	}
	return strings.Join(parts, ", ")
}

// inKeys is a condition: the row's pk is one of the keys of the jsonb
// array expression arr.
func (t relocTab) inKeys(arr string) string {
	return t.pkRow() + " IN (SELECT " + t.keyFields("k.j") + " FROM jsonb_array_elements(" + arr + ") AS k(j))"
}

// readTables reads the tables of schema from the catalog of conn.
func readTables(ctx context.Context, q pgx.Tx, schema string) ([]relocTab, error) {
	rows, err := q.Query(ctx, `SELECT c.relname::text, a.attname::text, format_type(a.atttypid, a.atttypmod), t.typname::text, a.atttypmod,
			a.attgenerated <> '', a.attidentity <> '',
			CASE WHEN t.typname IN ('vector', 'halfvec', 'sparsevec') THEN t.typsend::regproc::text ELSE '' END,
			coalesce((SELECT k.ord FROM pg_index i, unnest(i.indkey) WITH ORDINALITY k(attnum, ord)
				WHERE i.indrelid = c.oid AND i.indisprimary AND k.attnum = a.attnum), 0)
		FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		JOIN pg_type t ON t.oid = a.atttypid
		WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1) AND c.relkind IN ('r', 'p')
		ORDER BY c.relname, a.attnum`, schema)
	if err != nil {
		return nil, fmt.Errorf("reading the tables of %s: %w", schema, err)
	}
	defer rows.Close()
	var tabs []relocTab
	pkOrd := map[string]map[int64]relocCol{}
	for rows.Next() {
		var tbl string
		var c relocCol
		var ord int64
		if err := rows.Scan(&tbl, &c.name, &c.typ, &c.typname, &c.typmod, &c.generated, &c.identity, &c.send, &ord); err != nil {
			return nil, fmt.Errorf("reading the tables of %s: %w", schema, err)
		}
		if len(tabs) == 0 || tabs[len(tabs)-1].name != tbl {
			tabs = append(tabs, relocTab{name: tbl})
			pkOrd[tbl] = map[int64]relocCol{}
		}
		tabs[len(tabs)-1].cols = append(tabs[len(tabs)-1].cols, c)
		if ord > 0 {
			pkOrd[tbl][ord] = c
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the tables of %s: %w", schema, err)
	}
	for i := range tabs {
		// By name: a schema upgraded over the years (a re-embed's switch
		// adds its vector column last) and a fresh one differ in order.
		slices.SortFunc(tabs[i].cols, func(a, b relocCol) int { return strings.Compare(a.name, b.name) })
		m := pkOrd[tabs[i].name]
		for o := int64(1); o <= int64(len(m)); o++ {
			c, ok := m[o]
			if !ok {
				return nil, fmt.Errorf("table %s.%s: primary key columns out of order", schema, tabs[i].name)
			}
			tabs[i].pk = append(tabs[i].pk, c)
		}
		if len(tabs[i].pk) == 0 {
			return nil, fmt.Errorf("%w: table %s.%s has no primary key", ErrRelocateSchemaMismatch, schema, tabs[i].name)
		}
	}
	return tabs, nil
}

// matchTables refuses a source whose tables differ from the target's
// (names, columns, their types and generation): the copy follows the
// target's catalog and never the source's DDL.
func matchTables(target, source []relocTab) error {
	if len(target) != len(source) {
		return fmt.Errorf("%w: the target has %d tables, the source %d", ErrRelocateSchemaMismatch, len(target), len(source))
	}
	for i, t := range target {
		s := source[i]
		if s.name != t.name {
			return fmt.Errorf("%w: table %s of the target is not on the source (%s is)", ErrRelocateSchemaMismatch, t.name, s.name)
		}
		same := len(s.cols) == len(t.cols) && len(s.pk) == len(t.pk)
		for j := 0; same && j < len(t.cols); j++ {
			a, b := t.cols[j], s.cols[j]
			same = a.name == b.name && a.typname == b.typname && a.typmod == b.typmod && a.generated == b.generated
		}
		for j := 0; same && j < len(t.pk); j++ {
			same = t.pk[j].name == s.pk[j].name
		}
		if !same {
			return fmt.Errorf("%w: the columns of table %s differ", ErrRelocateSchemaMismatch, t.name)
		}
	}
	return nil
}

// stateNames lists the names of the schema's relocate_state rows of kind.
func stateNames(ctx context.Context, q pgx.Tx, schema, kind string) (map[string]string, error) {
	rows, err := q.Query(ctx, "SELECT name, def FROM "+relocTable("relocate_state")+" WHERE schema_name = $1 AND kind = $2", schema, kind)
	if err != nil {
		return nil, fmt.Errorf("reading the move's state (%s): %w", kind, err)
	}
	out := map[string]string{}
	for rows.Next() {
		var n, d string
		if err := rows.Scan(&n, &d); err != nil {
			return nil, fmt.Errorf("reading the move's state (%s): %w", kind, err)
		}
		out[n] = d
	}
	return out, rows.Err()
}

func setState(ctx context.Context, tx pgx.Tx, schema, kind, name, def string) error {
	_, err := tx.Exec(ctx, "INSERT INTO "+relocTable("relocate_state")+` (schema_name, kind, name, def) VALUES ($1, $2, $3, $4)
		ON CONFLICT (schema_name, kind, name) DO UPDATE SET def = EXCLUDED.def`, schema, kind, name, def)
	if err != nil {
		return fmt.Errorf("recording the move's state (%s %s): %w", kind, name, err)
	}
	return nil
}

// sortedKeys is the keys of m in order (deterministic work order).
func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
