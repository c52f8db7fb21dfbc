package tenant

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// CatchUp runs one pass: rows inserted, updated or deleted on the source
// since they were copied are applied to the target. The pass reads every
// source table in one snapshot (the target ends the pass consistent, as
// the source was at one moment): each table's (key, xmin) list goes into
// relocate_scan (after the first pass only the rows newer than the last
// pass's snapshot: catchUpTable) and is compared with the row map in SQL; a key that is new
// or whose xmin changed is copied again (delete and binary COPY), a key the
// source no longer has is deleted; the row map follows in the same target
// transaction. It returns the number of rows it applied. No triggers on the
// source, no logical replication: a row's xmin changes with every version.
func (m Relocation) CatchUp(ctx context.Context) (delta int64, err error) {
	delta, _, err = m.catchUp(ctx, false)
	return delta, err
}

// catchUp is CatchUp; verify: CatchUpVerified.
func (m Relocation) catchUp(ctx context.Context, verify bool) (delta int64, check RelocateCheck, err error) {
	if err := m.validate(); err != nil {
		return 0, check, err
	}
	err = m.withIncoming(ctx, func(dst, src *pgx.Conn, tabs []relocTab) error {
		if err := m.mustBeCopied(ctx, dst, tabs); err != nil {
			return err
		}
		return relocTx(ctx, src, true, relocateStmtTimeout, func(stx pgx.Tx) error {
			// The first query fixes the snapshot every table is read in.
			var horizon string
			if err := stx.QueryRow(ctx, "SELECT (txid_snapshot_xmin(txid_current_snapshot()) % 4294967296)::text").Scan(&horizon); err != nil {
				return fmt.Errorf("reading the source's snapshot horizon: %w", err)
			}
			for _, t := range tabs {
				d, err := m.catchUpTable(ctx, stx, dst, t, horizon)
				if err != nil {
					return fmt.Errorf("catching up table %s: %w", t.name, err)
				}
				delta += d
			}
			if !verify {
				return nil
			}
			var verr error
			check, verr = m.recordBase(ctx, stx, dst, horizon)
			return verr
		})
	})
	if err != nil {
		return delta, check, fmt.Errorf("catching up schema %q on the target: %w", m.Schema, err)
	}
	return delta, check, nil
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
// whose horizon (the xmin of its snapshot: every transaction before it has
// ended) is horizon, in one target transaction.
//
// A pass costs what changed, not the table: the row map after a pass is
// exactly the (key, xmin) the source showed in that pass's snapshot, and
// the pass records that snapshot's horizon with it. A row version the next
// snapshot shows with an xmin before that horizon was committed before
// the previous snapshot began, so the map has it already; only rows whose
// xmin is at or after the horizon are scanned (age(xmin) <= age(horizon):
// modulo-2^32 compare; a tuple frozen long ago whose raw xmin looks recent
// after a wraparound is scanned once more and found unchanged, the compare
// errs only on the side of scanning). Deletes are found by counting: after
// the changed rows are applied the map holds every key the source has (the
// unchanged ones were there), so equal counts mean no key is gone;
// otherwise the pass lists every key and deletes those the source lacks.
// The first pass after the copy (no horizon yet) lists every key.
func (m Relocation) catchUpTable(ctx context.Context, stx pgx.Tx, dst *pgx.Conn, t relocTab, horizon string) (int64, error) {
	scan, rowMap := relocTable("relocate_scan"), relocTable("relocate_rows")
	var applied int64
	err := relocTx(ctx, dst, false, relocateStmtTimeout, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('engram.relocate_schema', $1, true), set_config('engram.relocate_table', $2, true)`,
			m.Schema, t.name); err != nil {
			return err
		}
		since, err := stateNames(ctx, tx, m.Schema, "horizon")
		if err != nil {
			return err
		}
		filter := ""
		if h, err := strconv.ParseUint(since[t.name], 10, 32); err == nil {
			filter = fmt.Sprintf(" WHERE age(xmin) <= age('%d'::xid)", h)
		}
		scanKeys := func(where string) error {
			if _, err := tx.Exec(ctx, "DELETE FROM "+scan+" WHERE schema_name = $1 AND tbl = $2", m.Schema, t.name); err != nil {
				return fmt.Errorf("clearing the scan: %w", err)
			}
			if _, err := pipeCopy(ctx, stx.Conn(), tx.Conn(),
				"COPY (SELECT "+t.keyExpr()+", xmin::text FROM "+t.ident(m.Schema)+where+") TO STDOUT",
				"COPY "+scan+" (pk, src_xmin) FROM STDIN"); err != nil {
				return fmt.Errorf("scanning the source: %w", err)
			}
			return nil
		}
		if err := scanKeys(filter); err != nil {
			return err
		}
		// A fresh scan is never analyzed: the planner takes it for a row
		// and, both lists being large on a full pass, loops (quadratic:
		// 112 s for 20,000 rows). Hash anti-joins are linear. A filtered
		// scan is small: a loop over it probing the map's key is best.
		nestloop := func(on bool) error {
			_, err := tx.Exec(ctx, "SELECT set_config('enable_nestloop', $1, true)", strconv.FormatBool(on))
			return err
		}
		if err := nestloop(filter != ""); err != nil {
			return err
		}
		changed, xmins, err := collectKeys(ctx, tx, `SELECT s.pk, s.src_xmin FROM `+scan+` s WHERE s.schema_name = $1 AND s.tbl = $2 AND NOT EXISTS (
			SELECT 1 FROM `+rowMap+` r WHERE r.schema_name = s.schema_name AND r.tbl = s.tbl AND r.pk = s.pk AND r.src_xmin = s.src_xmin)`, m.Schema, t.name)
		if err != nil {
			return err
		}
		if err := nestloop(true); err != nil {
			return err
		}
		if err := m.applyChanged(ctx, stx, tx, t, changed, xmins); err != nil {
			return err
		}
		gone, err := m.goneKeys(ctx, stx, tx, t, filter != "", scanKeys, nestloop)
		if err != nil {
			return err
		}
		for b := range batches(gone, m.chunk()) {
			if err := m.deleteKeys(ctx, tx, t, b); err != nil {
				return err
			}
		}
		applied = int64(len(changed) + len(gone))
		return setState(ctx, tx, m.Schema, "horizon", t.name, horizon)
		// the scan stays until the next pass (or Finish) deletes it
	})
	return applied, err
}

// goneKeys lists the row map's keys the source no longer has. After a
// filtered scan (incremental) it first counts: the map holds every source
// key, so equal counts mean none is gone; else (and after a full scan) it
// compares the full list of keys with the map.
func (m Relocation) goneKeys(ctx context.Context, stx, tx pgx.Tx, t relocTab, filtered bool,
	scanKeys func(string) error, nestloop func(bool) error) ([]string, error) {
	rowMap, scan := relocTable("relocate_rows"), relocTable("relocate_scan")
	if filtered {
		var src, mapped int64
		if err := stx.QueryRow(ctx, "SELECT count(*) FROM "+t.ident(m.Schema)).Scan(&src); err != nil {
			return nil, fmt.Errorf("counting the source's rows: %w", err)
		}
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM "+rowMap+" WHERE schema_name = $1 AND tbl = $2", m.Schema, t.name).Scan(&mapped); err != nil {
			return nil, fmt.Errorf("counting the row map: %w", err)
		}
		if src == mapped {
			return nil, nil
		}
		if err := scanKeys(""); err != nil {
			return nil, err
		}
	}
	if err := nestloop(false); err != nil {
		return nil, err
	}
	gone, _, err := collectKeys(ctx, tx, `SELECT r.pk, '' FROM `+rowMap+` r WHERE r.schema_name = $1 AND r.tbl = $2 AND NOT EXISTS (
		SELECT 1 FROM `+scan+` s WHERE s.schema_name = r.schema_name AND s.tbl = r.tbl AND s.pk = r.pk)`, m.Schema, t.name)
	if err != nil {
		return nil, err
	}
	return gone, nestloop(true)
}

// deleteKeys deletes the rows of keys b from the target's table and its
// row map.
func (m Relocation) deleteKeys(ctx context.Context, tx pgx.Tx, t relocTab, b []string) error {
	if _, err := tx.Exec(ctx, "DELETE FROM "+t.ident(m.Schema)+" WHERE "+t.inKeys("$1::text::jsonb"), jsonArray(b)); err != nil {
		return fmt.Errorf("deleting rows: %w", err)
	}
	if _, err := tx.Exec(ctx, "DELETE FROM "+relocTable("relocate_rows")+" WHERE schema_name = $1 AND tbl = $2 AND pk = ANY($3)", m.Schema, t.name, b); err != nil {
		return fmt.Errorf("updating the row map: %w", err)
	}
	return nil
}

// applyChanged copies the rows of keys changed (new or of another xmin)
// again from the source's snapshot, and their map entries.
func (m Relocation) applyChanged(ctx context.Context, stx, tx pgx.Tx, t relocTab, changed, xmins []string) error {
	for b := range batches(changed, m.chunk()) {
		if err := m.deleteKeys(ctx, tx, t, b); err != nil {
			return err
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
	return nil
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
