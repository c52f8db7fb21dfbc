package tenant

// An incremental Verify for the freeze: CatchUpVerified compares the whole
// tenant online, in the snapshot of a catch-up pass, and records that pass
// as the verified base; Verify then compares only what changed since.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// CatchUpVerified runs one pass like CatchUp and then, in the same source
// snapshot, compares every table as Verify does (row counts and the
// checksum of every row, both servers in parallel). When they agree it
// records the pass as the verified base: from then on Verify compares
// only the rows the source changed since that snapshot (see
// verifySinceBase), so the final Verify inside the freeze costs what
// changed, not the table. Call it for the last pass before Freeze (it
// costs a full checksum of both sides, outside the freeze). A difference
// is ErrRelocateMismatch, and the base is forgotten (Verify compares
// everything again).
func (m Relocation) CatchUpVerified(ctx context.Context) (int64, RelocateCheck, error) {
	return m.catchUp(ctx, true)
}

// recordBase compares both sides in the pass's snapshot stx and the target
// as the pass left it, and records the pass's horizon as the base.
func (m Relocation) recordBase(ctx context.Context, stx pgx.Tx, dst *pgx.Conn, horizon string) (RelocateCheck, error) {
	srcC := make(chan tableSums, 1)
	go func() { srcC <- sumTables(ctx, stx, m.Schema) }()
	var d tableSums
	if err := relocTx(ctx, dst, true, relocateStmtTimeout, func(tx pgx.Tx) error {
		d = sumTables(ctx, tx, m.Schema)
		return d.err
	}); err != nil && d.err == nil {
		d.err = err
	}
	check, cmpErr := m.compareSums(<-srcC, d)
	err := relocTx(ctx, dst, false, relocateStmtTimeout, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM "+relocTable("relocate_state")+" WHERE schema_name = $1 AND kind = 'verified'", m.Schema); err != nil {
			return fmt.Errorf("forgetting the verified base: %w", err)
		}
		tabs := d.tabs
		if cmpErr != nil {
			tabs = nil // forgotten: Verify compares everything
		}
		for _, t := range tabs {
			if err := setState(ctx, tx, m.Schema, "verified", t.name, horizon); err != nil {
				return err
			}
		}
		return nil
	})
	if cmpErr != nil {
		return check, cmpErr
	}
	return check, err
}

// verifySinceBase is Verify after CatchUpVerified recorded a base for
// every table (done is false without one: Verify compares everything).
// The base proved both sides equal in the snapshot of a pass. Since then
// the source changed only rows whose xmin is at or after that pass's
// horizon (the argument of catchUpTable), and the target changed only by
// catch-up passes, which write only such keys and delete keys the source
// no longer has. So, per table, in one source snapshot: the exact row
// counts of both sides agree, and the rows the source changed since the
// base (their keys and hashes, listed on the source) are on the target
// with the same hashes (counted and summed there by key). The checksum
// reported covers the counts and those rows.
func (m Relocation) verifySinceBase(ctx context.Context) (done bool, check RelocateCheck, err error) {
	err = withTenantLock(ctx, m.Target, m.Schema, func(dst *pgx.Conn) error {
		var base map[string]string
		if err := relocTx(ctx, dst, true, relocateStmtTimeout, func(tx pgx.Tx) error {
			var present bool
			if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", relocTable("relocate_state")).Scan(&present); err != nil || !present {
				return err
			}
			base, err = stateNames(ctx, tx, m.Schema, "verified")
			return err
		}); err != nil || len(base) == 0 {
			return err
		}
		sc, err := m.Source.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("connecting to the source: %w", err)
		}
		defer sc.Release()
		return relocTx(ctx, sc.Conn(), true, relocateStmtTimeout, func(stx pgx.Tx) error {
			if err := hashSettings(ctx, stx); err != nil {
				return err
			}
			srcTabs, err := readTables(ctx, stx, m.Schema)
			if err != nil {
				return err
			}
			return relocTx(ctx, dst, false, relocateStmtTimeout, func(tx pgx.Tx) error {
				if err := hashSettings(ctx, tx); err != nil {
					return err
				}
				tabs, err := readTables(ctx, tx, m.Schema)
				if err != nil {
					return err
				}
				if err := matchTables(tabs, srcTabs); err != nil {
					return err
				}
				for _, t := range tabs {
					if !isXid(base[t.name]) {
						return nil // a table without a base: compare everything
					}
				}
				done = true
				h := sha256.New()
				var differ []string
				for _, t := range tabs {
					line, n, same, err := m.verifyTableSince(ctx, stx, tx, t, base[t.name])
					if err != nil {
						return fmt.Errorf("verifying table %s: %w", t.name, err)
					}
					if !same {
						differ = append(differ, line)
					}
					check.Rows += n
					check.Tables++
					fmt.Fprintf(h, "%s\n", line)
				}
				if _, err := tx.Exec(ctx, "DELETE FROM "+relocTable("relocate_scan")+" WHERE schema_name = $1", m.Schema); err != nil {
					return fmt.Errorf("clearing the scan: %w", err)
				}
				if len(differ) > 0 {
					return fmt.Errorf("%w: %s", ErrRelocateMismatch, strings.Join(differ, ", "))
				}
				check.Checksum = hex.EncodeToString(h.Sum(nil))[:16]
				return nil
			})
		})
	})
	if err != nil {
		return done, check, fmt.Errorf("verifying schema %q since the verified pass: %w", m.Schema, err)
	}
	return done, check, nil
}

// verifyTableSince compares table t: both sides' row counts, and the
// source's rows changed since horizon with the target's rows of the same
// keys (count and sum of hashes). It returns a line that names the table
// and its figures, the target's row count and whether all agree.
func (m Relocation) verifyTableSince(ctx context.Context, stx, tx pgx.Tx, t relocTab, horizon string) (string, int64, bool, error) {
	scan := relocTable("relocate_scan")
	if _, err := tx.Exec(ctx, `SELECT set_config('engram.relocate_schema', $1, true), set_config('engram.relocate_table', $2, true)`,
		m.Schema, t.name); err != nil {
		return "", 0, false, err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM "+scan+" WHERE schema_name = $1 AND tbl = $2", m.Schema, t.name); err != nil {
		return "", 0, false, fmt.Errorf("clearing the scan: %w", err)
	}
	if _, err := pipeCopy(ctx, stx.Conn(), tx.Conn(),
		"COPY (SELECT "+t.keyExpr()+", "+rowHash64(t)+"::text FROM "+t.ident(m.Schema)+" WHERE age(xmin) <= age('"+horizon+"'::xid)) TO STDOUT",
		"COPY "+scan+" (pk, src_xmin) FROM STDIN"); err != nil {
		return "", 0, false, fmt.Errorf("listing the source's changed rows: %w", err)
	}
	var srcRows int64
	if err := stx.QueryRow(ctx, "SELECT count(*) FROM "+t.ident(m.Schema)).Scan(&srcRows); err != nil {
		return "", 0, false, fmt.Errorf("counting the source's rows: %w", err)
	}
	var dstRows int64
	var srcN, srcSum, dstN, dstSum string
	if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+t.ident(m.Schema)+`),
		(SELECT count(*)::text FROM `+scan+` WHERE schema_name = $1 AND tbl = $2),
		(SELECT coalesce(sum(src_xmin::numeric), 0)::text FROM `+scan+` WHERE schema_name = $1 AND tbl = $2),
		(SELECT count(*)::text || ' ' || coalesce(sum(`+rowHash64(t)+`::numeric), 0)::text FROM `+t.ident(m.Schema)+`
			WHERE `+t.pkRow()+` IN (SELECT `+t.keyFields("s.pk::jsonb")+` FROM `+scan+` s WHERE s.schema_name = $1 AND s.tbl = $2))`,
		m.Schema, t.name).Scan(&dstRows, &srcN, &srcSum, &dstSum); err != nil {
		return "", 0, false, fmt.Errorf("comparing the changed rows: %w", err)
	}
	dstN, dstSum, _ = strings.Cut(dstSum, " ")
	line := fmt.Sprintf("%s (source %d rows, %s changed since the verified pass; target %d rows, %s of them)", t.name, srcRows, srcN, dstRows, dstN)
	same := srcRows == dstRows && srcN == dstN && srcSum == dstSum
	return line + ":" + srcSum, dstRows, same, nil
}

// isXid reports whether s is a transaction id (it goes into SQL as a
// literal).
func isXid(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}
