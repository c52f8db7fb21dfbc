package tenant

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// CatchUp runs one pass: rows inserted, updated or deleted on the source
// since they were copied are applied to the target. The pass reads every
// source table in one snapshot (the target ends the pass consistent, as
// the source was at one moment): each table's (key, xmin) list goes into
// relocate_scan and is compared with the row map in SQL; a key that is new
// or whose xmin changed is copied again (delete and binary COPY), a key the
// source no longer has is deleted; the row map follows in the same target
// transaction. It returns the number of rows it applied. No triggers on the
// source, no logical replication: a row's xmin changes with every version.
func (m Relocation) CatchUp(ctx context.Context) (delta int64, err error) {
	if err := m.validate(); err != nil {
		return 0, err
	}
	err = withTenantLock(ctx, m.Target, m.Schema, func(dst *pgx.Conn) error {
		if err := m.mustBeIncoming(ctx, dst); err != nil {
			return err
		}
		sc, err := m.Source.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("connecting to the source: %w", err)
		}
		defer sc.Release()
		tabs, err := m.matchedTables(ctx, dst, sc.Conn())
		if err != nil {
			return err
		}
		if err := m.mustBeCopied(ctx, dst, tabs); err != nil {
			return err
		}
		return relocTx(ctx, sc.Conn(), true, relocateStmtTimeout, func(stx pgx.Tx) error {
			for _, t := range tabs {
				d, err := m.catchUpTable(ctx, stx, dst, t)
				if err != nil {
					return fmt.Errorf("catching up table %s: %w", t.name, err)
				}
				delta += d
			}
			return nil
		})
	})
	if err != nil {
		return delta, fmt.Errorf("catching up schema %q on the target: %w", m.Schema, err)
	}
	return delta, nil
}

// mustBeCopied refuses a target whose bulk copy (rows and indexes) is not
// finished.
func (m Relocation) mustBeCopied(ctx context.Context, dst *pgx.Conn, tabs []relocTab) error {
	return relocTx(ctx, dst, true, relocateStmtTimeout, func(tx pgx.Tx) error {
		copied, err := stateNames(ctx, tx, m.Schema, "copied")
		if err != nil {
			return err
		}
		indexes, err := stateNames(ctx, tx, m.Schema, "index")
		if err != nil {
			return err
		}
		for _, t := range tabs {
			if copied[t.name] == "" {
				return fmt.Errorf("%w: table %s", ErrRelocateNotCopied, t.name)
			}
		}
		if len(indexes) > 0 {
			return fmt.Errorf("%w: %d indexes to build", ErrRelocateNotCopied, len(indexes))
		}
		return nil
	})
}

// catchUpTable brings table t of the target to the source's snapshot stx,
// in one target transaction.
func (m Relocation) catchUpTable(ctx context.Context, stx pgx.Tx, dst *pgx.Conn, t relocTab) (int64, error) {
	scan, rowMap := relocTable("relocate_scan"), relocTable("relocate_rows")
	var applied int64
	err := relocTx(ctx, dst, false, relocateStmtTimeout, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('engram.relocate_schema', $1, true), set_config('engram.relocate_table', $2, true)`,
			m.Schema, t.name); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+scan+" WHERE schema_name = $1 AND tbl = $2", m.Schema, t.name); err != nil {
			return fmt.Errorf("clearing the scan: %w", err)
		}
		if _, err := pipeCopy(ctx, stx.Conn(), tx.Conn(),
			"COPY (SELECT "+t.keyExpr()+", xmin::text FROM "+t.ident(m.Schema)+") TO STDOUT",
			"COPY "+scan+" (pk, src_xmin) FROM STDIN"); err != nil {
			return fmt.Errorf("scanning the source: %w", err)
		}
		// Both lists are fresh and never analyzed: the planner takes them
		// for a row each and loops (quadratic: 112 s for 20,000 rows).
		// Hash anti-joins are linear.
		if _, err := tx.Exec(ctx, "SET LOCAL enable_nestloop = off"); err != nil {
			return err
		}
		changed, xmins, err := collectKeys(ctx, tx, `SELECT s.pk, s.src_xmin FROM `+scan+` s WHERE s.schema_name = $1 AND s.tbl = $2 AND NOT EXISTS (
			SELECT 1 FROM `+rowMap+` r WHERE r.schema_name = s.schema_name AND r.tbl = s.tbl AND r.pk = s.pk AND r.src_xmin = s.src_xmin)`, m.Schema, t.name)
		if err != nil {
			return err
		}
		gone, _, err := collectKeys(ctx, tx, `SELECT r.pk, '' FROM `+rowMap+` r WHERE r.schema_name = $1 AND r.tbl = $2 AND NOT EXISTS (
			SELECT 1 FROM `+scan+` s WHERE s.schema_name = r.schema_name AND s.tbl = r.tbl AND s.pk = r.pk)`, m.Schema, t.name)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SET LOCAL enable_nestloop = on"); err != nil {
			return err
		}
		applied = int64(len(changed) + len(gone))
		for b := range batches(append(gone, changed...), m.chunk()) {
			if _, err := tx.Exec(ctx, "DELETE FROM "+t.ident(m.Schema)+" WHERE "+t.inKeys("$1::text::jsonb"), jsonArray(b)); err != nil {
				return fmt.Errorf("deleting changed rows: %w", err)
			}
			if _, err := tx.Exec(ctx, "DELETE FROM "+rowMap+" WHERE schema_name = $1 AND tbl = $2 AND pk = ANY($3)", m.Schema, t.name, b); err != nil {
				return fmt.Errorf("updating the row map: %w", err)
			}
		}
		cols := strings.Join(t.copyCols(), ", ")
		for i := 0; i < len(changed); i += m.chunk() {
			b, bx := changed[i:min(i+m.chunk(), len(changed))], xmins[i:min(i+m.chunk(), len(changed))]
			got, err := pipeCopy(ctx, stx.Conn(), tx.Conn(),
				"COPY (SELECT "+cols+" FROM "+t.ident(m.Schema)+" WHERE "+t.inKeys(quoteLiteral(jsonArray(b))+"::jsonb")+") TO STDOUT (FORMAT binary)",
				"COPY "+t.ident(m.Schema)+" ("+cols+") FROM STDIN (FORMAT binary)")
			if err != nil {
				return err
			}
			if got != int64(len(b)) {
				return fmt.Errorf("the source sent %d rows for %d keys", got, len(b))
			}
			entries := make([][]any, len(b))
			for j := range b {
				entries[j] = []any{m.Schema, t.name, b[j], bx[j]}
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{ControlSchema, "relocate_rows"}, []string{"schema_name", "tbl", "pk", "src_xmin"},
				pgx.CopyFromRows(entries)); err != nil {
				return fmt.Errorf("updating the row map: %w", err)
			}
		}
		return nil // the scan stays until the next pass (or Finish) deletes it
	})
	return applied, err
}

// collectKeys runs q, which answers (key, xmin) rows.
func collectKeys(ctx context.Context, tx pgx.Tx, q string, args ...any) (keys, xmins []string, err error) {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("comparing with the row map: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, x string
		if err := rows.Scan(&k, &x); err != nil {
			return nil, nil, fmt.Errorf("comparing with the row map: %w", err)
		}
		keys, xmins = append(keys, k), append(xmins, x)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("comparing with the row map: %w", err)
	}
	return keys, xmins, nil
}

// batches yields keys in slices of at most n.
func batches(keys []string, n int) func(func([]string) bool) {
	return func(yield func([]string) bool) {
		for i := 0; i < len(keys); i += n {
			if !yield(keys[i:min(i+n, len(keys))]) {
				return
			}
		}
	}
}

// jsonArray joins keys (each a jsonb text) into one JSON array.
func jsonArray(keys []string) string { return "[" + strings.Join(keys, ",") + "]" }
