package tenant

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Verify compares, table by table, exact row counts and an
// order-independent checksum of every column on both servers, read in
// parallel, each in one snapshot: the sum (numeric, exact) of the first 64
// bits of md5 of each row, where the row is its text form (every column
// but pgvector's, under fixed output settings) followed by the binary form
// of its vectors (pgvector has no hash support, and its text form is
// several times slower). Generated columns are left out: each server
// computes them from the columns hashed (the copy never writes them), and
// a memory's tsvector is a third of the time (6.1 s at 200,000 memories).
// A difference is ErrRelocateMismatch naming the
// tables. The source should be frozen, else it may have moved on.
func (m Relocation) Verify(ctx context.Context) (RelocateCheck, error) {
	var check RelocateCheck
	if err := m.validate(); err != nil {
		return check, err
	}
	if done, check, err := m.verifySinceBase(ctx); done || err != nil {
		return check, err
	}
	run := func(p *pgxpool.Pool, out chan<- tableSums) {
		var s tableSums
		s.err = func() error {
			c, err := p.Acquire(ctx)
			if err != nil {
				return err
			}
			defer c.Release()
			return relocTx(ctx, c.Conn(), true, relocateStmtTimeout, func(tx pgx.Tx) error {
				s = sumTables(ctx, tx, m.Schema)
				return s.err
			})
		}()
		out <- s
	}
	srcC, dstC := make(chan tableSums, 1), make(chan tableSums, 1)
	go run(m.Source, srcC)
	go run(m.Target, dstC)
	return m.compareSums(<-srcC, <-dstC)
}

// tableSums is each table's row count and checksum on one side.
type tableSums struct {
	sums map[string][2]string
	tabs []relocTab
	err  error
}

// sumTables reads the row count and checksum of every table of schema in
// tx (which gets the fixed output settings of the row hash).
func sumTables(ctx context.Context, tx pgx.Tx, schema string) (s tableSums) {
	if s.err = hashSettings(ctx, tx); s.err != nil {
		return s
	}
	if s.tabs, s.err = readTables(ctx, tx, schema); s.err != nil {
		return s
	}
	s.sums = map[string][2]string{}
	for _, t := range s.tabs {
		var n, sum string
		if err := tx.QueryRow(ctx, "SELECT count(*)::text, coalesce(sum("+rowHash64(t)+"::numeric), 0)::text FROM "+t.ident(schema)).Scan(&n, &sum); err != nil {
			s.err = fmt.Errorf("checksumming table %s: %w", t.name, err)
			return s
		}
		s.sums[t.name] = [2]string{n, sum}
	}
	return s
}

// hashSettings fixes the output settings the row hash depends on.
func hashSettings(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, YMD'; SET LOCAL IntervalStyle = 'postgres';
		SET LOCAL extra_float_digits = 1; SET LOCAL bytea_output = 'hex'`)
	if err != nil {
		return fmt.Errorf("fixing the output settings: %w", err)
	}
	return nil
}

// rowHash64 is a row's hash: the first 64 bits of md5 of rowHash, a bigint.
func rowHash64(t relocTab) string {
	return "('x' || substr(md5(" + rowHash(t) + "), 1, 16))::bit(64)::bigint"
}

// compareSums compares both sides' counts and checksums, table by table.
func (m Relocation) compareSums(src, dst tableSums) (RelocateCheck, error) {
	var check RelocateCheck
	if src.err != nil {
		return check, fmt.Errorf("verifying schema %q on the source: %w", m.Schema, src.err)
	}
	if dst.err != nil {
		return check, fmt.Errorf("verifying schema %q on the target: %w", m.Schema, dst.err)
	}
	if err := matchTables(dst.tabs, src.tabs); err != nil {
		return check, err
	}
	h := sha256.New()
	var differ []string
	for _, t := range dst.tabs {
		a, b := src.sums[t.name], dst.sums[t.name]
		if a != b {
			differ = append(differ, fmt.Sprintf("%s (source %s rows, target %s)", t.name, a[0], b[0]))
		}
		var n int64
		_, _ = fmt.Sscan(b[0], &n)
		check.Rows += n
		check.Tables++
		fmt.Fprintf(h, "%s:%s:%s\n", t.name, b[0], b[1])
	}
	if len(differ) > 0 {
		return check, fmt.Errorf("%w: %s", ErrRelocateMismatch, strings.Join(differ, ", "))
	}
	check.Checksum = hex.EncodeToString(h.Sum(nil))[:16]
	return check, nil
}

// rowHash is the bytes Verify hashes for a row of t.
func rowHash(t relocTab) string {
	var plain, vecs []string
	for _, c := range t.cols {
		if c.generated {
			continue // computed by each server from the hashed columns (and the copy never writes it)
		}
		id := pgx.Identifier{c.name}.Sanitize()
		if c.send != "" {
			vecs = append(vecs, "coalesce("+c.send+"("+id+"), '\\x'::bytea)")
		} else {
			plain = append(plain, id)
		}
	}
	expr := "convert_to(ROW(" + strings.Join(plain, ", ") + ")::text, 'UTF8')"
	for _, v := range vecs {
		expr += " || " + v
	}
	return expr
}

// Finish makes the target the tenant's home, in one transaction: the
// foreign keys Prepare took off are added back (validated: the target is
// as consistent as the source's snapshot of the last pass), identity
// columns continue past the copied ids, the move's bookkeeping is deleted
// and the schema marker is rewritten to this runtime's normal one. No
// trigger was disabled (Prepare's target has none but the foreign keys'),
// so none is to enable. Idempotent (a target this runtime's home already
// is done).
func (m Relocation) Finish(ctx context.Context) error {
	if err := m.validate(); err != nil {
		return err
	}
	err := withTenantLock(ctx, m.Target, m.Schema, func(dst *pgx.Conn) error {
		exists, mk, err := schemaState(ctx, dst, m.Schema)
		if err != nil {
			return err
		}
		if exists && mk.uid == m.Owner.UID {
			return nil
		}
		if err := m.mustBeIncoming(ctx, dst); err != nil {
			return err
		}
		var tabs []relocTab
		if err := relocTx(ctx, dst, true, relocateStmtTimeout, func(tx pgx.Tx) (err error) {
			tabs, err = readTables(ctx, tx, m.Schema)
			return err
		}); err != nil {
			return err
		}
		if err := m.mustBeCopied(ctx, dst, tabs); err != nil {
			return err
		}
		return relocTx(ctx, dst, false, relocateStmtTimeout, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL search_path = pg_catalog"); err != nil {
				return err
			}
			fks, err := stateNames(ctx, tx, m.Schema, "fk")
			if err != nil {
				return err
			}
			for _, name := range sortedKeys(fks) {
				if _, err := tx.Exec(ctx, fks[name]); err != nil {
					return fmt.Errorf("adding foreign key %s back: %w", name, err)
				}
			}
			for _, t := range tabs {
				for _, c := range t.cols {
					if !c.identity {
						continue
					}
					id := pgx.Identifier{c.name}.Sanitize()
					if _, err := tx.Exec(ctx, "SELECT setval(pg_get_serial_sequence($1, $2), coalesce((SELECT max("+id+") FROM "+t.ident(m.Schema)+"), 0) + 1, false)",
						t.ident(m.Schema), c.name); err != nil {
						return fmt.Errorf("moving the identity of %s.%s past the copied ids: %w", t.name, c.name, err)
					}
				}
			}
			if err := clearRelocateState(ctx, tx, m.Schema); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, "COMMENT ON SCHEMA "+pgx.Identifier{m.Schema}.Sanitize()+" IS "+quoteLiteral(m.Owner.marker()))
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("finishing the move of schema %q on the target: %w", m.Schema, err)
	}
	return nil
}

func clearRelocateState(ctx context.Context, tx pgx.Tx, schema string) error {
	for _, t := range []string{"relocate_state", "relocate_rows", "relocate_scan"} {
		if _, err := tx.Exec(ctx, "DELETE FROM "+relocTable(t)+" WHERE schema_name = $1", schema); err != nil {
			return fmt.Errorf("deleting the move's bookkeeping: %w", err)
		}
	}
	return nil
}

// DropIncoming drops the target's incoming schema, its roles and the
// move's bookkeeping (abort), only if the schema carries this runtime's
// incoming marker: one transaction, so a crash leaves all or nothing. A
// target without the schema is left alone (its roles too: they could be
// another copy's, and a server without the schema holds nothing of it).
func (m Relocation) DropIncoming(ctx context.Context) error {
	if err := m.validate(); err != nil {
		return err
	}
	return m.onExistingSchema(ctx, m.Target, "dropping the incoming copy", func(conn *pgx.Conn, mk marker) error {
		if mk.relocate != relocateIncoming || mk.relocateUID != m.Owner.UID {
			return fmt.Errorf("%w: schema %q, refusing to drop it", ErrRelocateNotIncoming, m.Schema)
		}
		return m.dropCopy(ctx, conn, true)
	})
}

// DropUnswitched drops the target's copy of a move that will not switch
// (an abort, a failure, the runtime's deletion): this runtime's incoming
// copy, or the copy Finish already made this runtime's home when the switch
// (the caller's status patch) was never recorded (review 14, H1: a crash
// between the two). A home-marked copy carries the same marker as the
// tenant's live home, so it is dropped only when the target pool reaches
// the server the move was copying to (to) and not the tenant's recorded
// home (from): a target connection repointed at the home's server since
// must never drop the live tenant (review 15, H1). The caller asserts the
// switch was not recorded; a schema or role of another runtime is refused
// as DropIncoming refuses it.
func (m Relocation) DropUnswitched(ctx context.Context, from, to ServerIdentity) error {
	if err := m.validate(); err != nil {
		return err
	}
	id, err := Identify(ctx, m.Target)
	if err != nil {
		return fmt.Errorf("dropping the unswitched copy of schema %q: %w", m.Schema, err)
	}
	return m.onExistingSchema(ctx, m.Target, "dropping the unswitched copy", func(conn *pgx.Conn, mk marker) error {
		incoming := mk.relocate == relocateIncoming && mk.relocateUID == m.Owner.UID
		finished := mk.relocate == "" && mk.managed && mk.uid == m.Owner.UID
		if finished && (!to.Verifiable(id) || !to.Same(id) || from.Same(id)) {
			return fmt.Errorf("%w: schema %q on %s is marked as this runtime's home and that server is not the move's target (%s), refusing to drop it",
				ErrRelocateNotIncoming, m.Schema, id, to)
		}
		if !incoming && !finished {
			return fmt.Errorf("%w: schema %q, refusing to drop it", ErrRelocateNotIncoming, m.Schema)
		}
		return m.dropCopy(ctx, conn, true)
	})
}

// DropMoved drops the source's moved copy and its roles, in one
// transaction, only if the schema is marked moved by this runtime.
func (m Relocation) DropMoved(ctx context.Context) error {
	if err := m.validate(); err != nil {
		return err
	}
	return m.onExistingSchema(ctx, m.Source, "dropping the moved copy", func(conn *pgx.Conn, mk marker) error {
		if mk.relocate != relocateMoved || mk.relocateUID != m.Owner.UID {
			return fmt.Errorf("schema %q is not this runtime's moved copy (%w), refusing to drop it", m.Schema, ErrOwnedByOther)
		}
		// The old pods' read-only sessions hold locks the drop waits for.
		if err := endLoginSessions(ctx, conn, LoginRole(m.Schema)); err != nil {
			return err
		}
		return m.dropCopy(ctx, conn, false)
	})
}

// onExistingSchema runs fn under the tenant lock on pool with the schema's
// marker; a server without the schema is left alone (fn is not run). An
// error says what was being done ("<what> of schema ...").
func (m Relocation) onExistingSchema(ctx context.Context, pool *pgxpool.Pool, what string, fn func(*pgx.Conn, marker) error) error {
	err := withTenantLock(ctx, pool, m.Schema, func(conn *pgx.Conn) error {
		exists, mk, err := schemaState(ctx, conn, m.Schema)
		if err != nil || !exists {
			return err
		}
		return fn(conn, mk)
	})
	if err != nil {
		return fmt.Errorf("%s of schema %q: %w", what, m.Schema, err)
	}
	return nil
}

// dropCopy drops the schema and both roles (each must carry this
// runtime's UID) and, on a target, the move's bookkeeping.
func (m Relocation) dropCopy(ctx context.Context, conn *pgx.Conn, bookkeeping bool) error {
	roles := []string{LoginRole(m.Schema), OwnerRole(m.Schema)}
	for _, r := range roles {
		exists, rm, err := roleState(ctx, conn, r)
		if err != nil {
			return err
		}
		if exists {
			if err := mustOwn(rm, m.Owner, "role", r); err != nil {
				return fmt.Errorf("refusing to drop: %w", err)
			}
		}
	}
	return relocTx(ctx, conn, false, relocateStmtTimeout, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{m.Schema}.Sanitize()+" CASCADE"); err != nil {
			return fmt.Errorf("dropping the schema: %w", err)
		}
		for _, r := range roles {
			var exists bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", r).Scan(&exists); err != nil || !exists {
				if err != nil {
					return err
				}
				continue
			}
			if err := actAs(ctx, tx.Conn(), r); err != nil {
				return err
			}
			ident := pgx.Identifier{r}.Sanitize()
			if _, err := tx.Exec(ctx, "DROP OWNED BY "+ident); err != nil {
				return fmt.Errorf("dropping privileges of %q: %w", r, err)
			}
			if _, err := tx.Exec(ctx, "DROP ROLE "+ident); err != nil {
				return fmt.Errorf("dropping role %q: %w", r, err)
			}
		}
		if !bookkeeping {
			return nil
		}
		var present bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", relocTable("relocate_state")).Scan(&present); err != nil || !present {
			return err
		}
		return clearRelocateState(ctx, tx, m.Schema)
	})
}
