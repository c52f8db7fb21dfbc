package tenant

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Copy bulk-copies every table (binary COPY source→target, in pk order,
// chunks each committed with its row map and the table's cursor),
// resumable after a crash (each table restarts after the last committed
// chunk); when all is copied it rebuilds the secondary indexes Prepare took
// off, one committed build at a time; done when rows and indexes are in
// place. Bounded by Budget (at least one chunk or build per call).
func (m Relocation) Copy(ctx context.Context) (done bool, p RelocateProgress, err error) {
	if err := m.validate(); err != nil {
		return false, p, err
	}
	dl, rep := m.deadline(), reporter{fn: m.Progress}
	p.Step = "copying"
	err = m.withIncoming(ctx, func(dst, src *pgx.Conn, tabs []relocTab) error {
		var err error
		var copied, cursors, indexes map[string]string
		err = relocTx(ctx, dst, false, relocateStmtTimeout, func(tx pgx.Tx) error {
			if copied, err = stateNames(ctx, tx, m.Schema, "copied"); err != nil {
				return err
			}
			if cursors, err = stateNames(ctx, tx, m.Schema, "cursor"); err != nil {
				return err
			}
			if indexes, err = stateNames(ctx, tx, m.Schema, "index"); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "SELECT count(*) FROM "+relocTable("relocate_rows")+" WHERE schema_name = $1", m.Schema).Scan(&p.CopiedRows)
		})
		if err != nil {
			return err
		}
		if p.TotalRows, err = countRows(ctx, src, m.Schema, tabs); err != nil {
			return err
		}
		worked := false
		for _, t := range tabs {
			for copied[t.name] == "" {
				if worked && past(dl) {
					rep.report(p, true)
					return nil
				}
				n, fin, cur, err := m.copyChunk(ctx, dst, src, t, cursors[t.name])
				if err != nil {
					return fmt.Errorf("copying table %s: %w", t.name, err)
				}
				worked, cursors[t.name], p.CopiedRows = true, cur, p.CopiedRows+n
				if fin {
					copied[t.name] = "1"
				}
				rep.report(p, false)
			}
		}
		p.Step = "indexing"
		rep.report(p, true)
		for _, name := range sortedKeys(indexes) {
			if worked && past(dl) {
				return nil
			}
			if err := m.buildIndex(ctx, dst, name, indexes[name]); err != nil {
				return err
			}
			worked = true
		}
		p.Step, done = "copied", true
		rep.report(p, true)
		return nil
	})
	if err != nil {
		return false, p, fmt.Errorf("copying schema %q to the target: %w", m.Schema, err)
	}
	return done, p, nil
}

// withIncoming runs fn under the tenant lock on the target, once the
// target holds this runtime's incoming copy, with a source connection and
// the tables (matchedTables).
func (m Relocation) withIncoming(ctx context.Context, fn func(dst, src *pgx.Conn, tabs []relocTab) error) error {
	return withTenantLock(ctx, m.Target, m.Schema, func(dst *pgx.Conn) error {
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
		return fn(dst, sc.Conn(), tabs)
	})
}

// matchedTables reads the target's tables and refuses a source whose
// tables differ.
func (m Relocation) matchedTables(ctx context.Context, dst, src *pgx.Conn) ([]relocTab, error) {
	var tabs, srcTabs []relocTab
	err := relocTx(ctx, dst, true, relocateStmtTimeout, func(tx pgx.Tx) (err error) {
		tabs, err = readTables(ctx, tx, m.Schema)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	err = relocTx(ctx, src, true, relocateStmtTimeout, func(tx pgx.Tx) (err error) {
		srcTabs, err = readTables(ctx, tx, m.Schema)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	return tabs, matchTables(tabs, srcTabs)
}

// countRows counts the rows of the tables on conn, in one snapshot.
func countRows(ctx context.Context, conn *pgx.Conn, schema string, tabs []relocTab) (int64, error) {
	parts := make([]string, len(tabs))
	for i, t := range tabs {
		parts[i] = "(SELECT count(*) FROM " + t.ident(schema) + ")"
	}
	var n int64
	err := relocTx(ctx, conn, true, relocateStmtTimeout, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SELECT "+strings.Join(parts, " + ")).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("counting the source's rows: %w", err)
	}
	return n, nil
}

func (m Relocation) chunk() int {
	if m.ChunkRows > 0 {
		return m.ChunkRows
	}
	return relocateChunk
}

// copyChunk copies the next chunk of t after cursor (a key, "" for the
// first): the source's keys and xmins and its rows are read in one
// snapshot; the rows, their row map and the new cursor commit in one
// target transaction. fin: the table is copied.
func (m Relocation) copyChunk(ctx context.Context, dst, src *pgx.Conn, t relocTab, cursor string) (n int64, fin bool, next string, err error) {
	limit := m.chunk()
	from := t.ident(m.Schema)
	if cursor != "" {
		from += " WHERE " + t.pkRow() + " > ROW(" + t.keyFields(quoteLiteral(cursor)+"::jsonb") + ")"
	}
	order := fmt.Sprintf(" ORDER BY %s LIMIT %d", strings.TrimSuffix(strings.TrimPrefix(t.pkRow(), "ROW("), ")"), limit)
	next = cursor
	err = relocTx(ctx, src, true, relocateStmtTimeout, func(stx pgx.Tx) error {
		rows, err := stx.Query(ctx, "SELECT "+t.keyExpr()+", xmin::text FROM "+from+order)
		if err != nil {
			return fmt.Errorf("reading keys: %w", err)
		}
		var keys [][]any
		for rows.Next() {
			var k, x string
			if err := rows.Scan(&k, &x); err != nil {
				return fmt.Errorf("reading keys: %w", err)
			}
			keys = append(keys, []any{m.Schema, t.name, k, x})
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("reading keys: %w", err)
		}
		n, fin = int64(len(keys)), len(keys) < limit
		if n > 0 {
			next = keys[n-1][2].(string)
		}
		return relocTx(ctx, dst, false, relocateStmtTimeout, func(dtx pgx.Tx) error {
			if n > 0 {
				cols := strings.Join(t.copyCols(), ", ")
				got, err := pipeCopy(ctx, stx.Conn(), dtx.Conn(),
					"COPY (SELECT "+cols+" FROM "+from+order+") TO STDOUT (FORMAT binary)",
					"COPY "+t.ident(m.Schema)+" ("+cols+") FROM STDIN (FORMAT binary)")
				if err != nil {
					return err
				}
				if got != n {
					return fmt.Errorf("the source sent %d rows for %d keys", got, n)
				}
				if _, err := dtx.CopyFrom(ctx, pgx.Identifier{ControlSchema, "relocate_rows"}, []string{"schema_name", "tbl", "pk", "src_xmin"},
					pgx.CopyFromRows(keys)); err != nil {
					return fmt.Errorf("writing the row map: %w", err)
				}
				if err := setState(ctx, dtx, m.Schema, "cursor", t.name, next); err != nil {
					return err
				}
			}
			if fin {
				return setState(ctx, dtx, m.Schema, "copied", t.name, "1")
			}
			return nil
		})
	})
	return n, fin, next, err
}

// pipeCopy streams COPY out of src into COPY in on dst and returns the
// rows dst took.
func pipeCopy(ctx context.Context, src, dst *pgx.Conn, out, in string) (int64, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := src.PgConn().CopyTo(ctx, pw, out)
		_ = pw.CloseWithError(err)
		done <- err
	}()
	tag, err := dst.PgConn().CopyFrom(ctx, pr, in)
	_ = pr.CloseWithError(fmt.Errorf("the target stopped reading: %w", err))
	if serr := <-done; serr != nil && err == nil {
		err = fmt.Errorf("reading from the source: %w", serr)
	}
	if err != nil {
		return 0, fmt.Errorf("copying rows: %w", err)
	}
	return tag.RowsAffected(), nil
}

// buildIndex builds one index Prepare took off, from its recorded
// definition, and forgets it in the same transaction.
func (m Relocation) buildIndex(ctx context.Context, dst *pgx.Conn, name, def string) error {
	timeout := m.Provision.IndexTimeout
	if timeout <= 0 {
		timeout = DefaultIndexTimeout
	}
	start := time.Now()
	err := relocTx(ctx, dst, false, timeout, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL search_path = pg_catalog; SET LOCAL maintenance_work_mem = '"+relocateIndexMemory+"'"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, def); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "DELETE FROM "+relocTable("relocate_state")+" WHERE schema_name = $1 AND kind = 'index' AND name = $2", m.Schema, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("building index %s on the target (%s): %w", name, time.Since(start).Round(time.Millisecond), err)
	}
	return nil
}
