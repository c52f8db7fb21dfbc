package tenant

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Freeze makes the tenant's login role read-only on the source, durably
// (all of it survives an operator crash). The order is chosen so that the
// service never meets the REVOKE (SQLSTATE 42501, which it answers 500: a
// missing grant is a fault, not a wait) but the read-only default (25006,
// which it answers 503, and the client retries):
//
//  1. the schema marker records the freeze (frozen=move): Provision then
//     leaves the write grants revoked (provision.go) and Frozen reports it;
//  2. ALTER ROLE <login> IN DATABASE <db> SET default_transaction_read_only
//     = on, committed: every session that starts from now on is read-only;
//  3. the login role's sessions in that database are ended: their write
//     transactions in flight roll back (never acknowledged: the service
//     sees 57P01, answers 503), the pools reconnect read-only;
//  4. LOCK TABLE ... IN EXCLUSIVE MODE on every table, in a short
//     transaction: waits out any write still in flight (a session that
//     connected while step 2 committed), up to lock_timeout (5 s); one
//     still open then (idle in a transaction) is ended, its write never
//     acknowledged; then the sessions are ended again;
//  5. REVOKE INSERT, UPDATE, DELETE, TRUNCATE on the schema's tables (and
//     the column grants) from the login role, last: a defence against a
//     client that sets the read-only default away, which by now no
//     session of the service can meet (all of them started read-only).
//
// Reads go on throughout. Idempotent. The admin needs, besides what
// Provision needs, to end the login role's sessions: PostgreSQL lets a
// member of the role do it, so Freeze grants the login role to the admin
// when it may not (as Drop does), or pg_signal_backend.
func (m Relocation) Freeze(ctx context.Context) error {
	if err := m.validate(); err != nil {
		return err
	}
	login := pgx.Identifier{LoginRole(m.Schema)}.Sanitize()
	err := withTenantLock(ctx, m.Source, m.Schema, func(conn *pgx.Conn) error {
		mk, err := m.sourceMarker(ctx, conn)
		if err != nil {
			return err
		}
		if mk.relocate == relocateMoved {
			return nil // frozen until dropped
		}
		if !mk.frozen {
			if err := m.commentSchema(ctx, conn, m.Owner.relocateMarker("", true, "")); err != nil {
				return err
			}
		}
		db, err := currentDatabase(ctx, conn)
		if err != nil {
			return err
		}
		tables, err := schemaTables(ctx, conn, m.Schema)
		if err != nil {
			return err
		}
		readOnly := "ALTER ROLE " + login + " IN DATABASE " + pgx.Identifier{db}.Sanitize() + " SET default_transaction_read_only = on"
		if err := relocTx(ctx, conn, false, relocateStmtTimeout, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, readOnly)
			return err
		}); err != nil {
			return fmt.Errorf("making the login role read-only: %w", err)
		}
		if err := endLoginSessions(ctx, conn, LoginRole(m.Schema)); err != nil {
			return err
		}
		idents := make([]string, len(tables))
		for i, t := range tables {
			idents[i] = pgx.Identifier{m.Schema, t}.Sanitize()
		}
		lock := func() error {
			return relocTx(ctx, conn, false, relocateStmtTimeout, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "LOCK TABLE "+strings.Join(idents, ", ")+" IN EXCLUSIVE MODE")
				return err
			})
		}
		err = lock()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
			// A write transaction still open after lock_timeout (a session
			// that connected while step 2 committed, idle in one): its
			// write was never acknowledged; ending its session rolls it
			// back, and the lock is taken then.
			if err := endLoginSessions(ctx, conn, LoginRole(m.Schema)); err != nil {
				return err
			}
			err = lock()
		}
		if err != nil {
			return fmt.Errorf("waiting for the writes in flight: %w", err)
		}
		if err := endLoginSessions(ctx, conn, LoginRole(m.Schema)); err != nil {
			return err
		}
		err = relocTx(ctx, conn, false, relocateStmtTimeout, func(tx pgx.Tx) error {
			stmts := []string{
				"REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA " + pgx.Identifier{m.Schema}.Sanitize() + " FROM " + login,
			}
			for _, table := range slices.Sorted(maps.Keys(columnGrants)) {
				if !slices.Contains(tables, table) {
					continue
				}
				for _, priv := range slices.Sorted(maps.Keys(columnGrants[table])) {
					if priv == "SELECT" {
						continue
					}
					cols := make([]string, len(columnGrants[table][priv]))
					for i, c := range columnGrants[table][priv] {
						cols[i] = pgx.Identifier{c}.Sanitize()
					}
					stmts = append(stmts, "REVOKE "+priv+" ("+strings.Join(cols, ", ")+") ON "+pgx.Identifier{m.Schema, table}.Sanitize()+" FROM "+login)
				}
			}
			for _, s := range stmts {
				if _, err := tx.Exec(ctx, s); err != nil {
					return fmt.Errorf("%s: %w", firstLine(s), err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("revoking the login role's writes: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("freezing schema %q on the source: %w", m.Schema, err)
	}
	return nil
}

// Unfreeze undoes Freeze exactly: the read-only default is reset, the
// grants Provision gives are given back (ensureGrants), the marker loses
// its freeze (last: a crash before leaves the schema frozen, and Unfreeze
// is called again), and the login role's sessions, read-only since they
// began, are ended. Refused on a moved source: it stays read-only until
// dropped.
func (m Relocation) Unfreeze(ctx context.Context) error {
	if err := m.validate(); err != nil {
		return err
	}
	names := roleNames{owner: OwnerRole(m.Schema), login: LoginRole(m.Schema)}
	err := withTenantLock(ctx, m.Source, m.Schema, func(conn *pgx.Conn) error {
		mk, err := m.sourceMarker(ctx, conn)
		if err != nil {
			return err
		}
		if mk.relocate == relocateMoved {
			return fmt.Errorf("the schema was moved to %s: it stays read-only until dropped", mk.movedTo)
		}
		db, err := currentDatabase(ctx, conn)
		if err != nil {
			return err
		}
		var setting bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
			JOIN pg_database d ON d.oid = s.setdatabase WHERE r.rolname = $1 AND d.datname = $2)`, names.login, db).Scan(&setting); err != nil {
			return fmt.Errorf("reading the login role's settings: %w", err)
		}
		if !mk.frozen && !setting {
			return nil
		}
		if _, err := conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{names.login}.Sanitize()+" IN DATABASE "+pgx.Identifier{db}.Sanitize()+
			" RESET default_transaction_read_only"); err != nil {
			return fmt.Errorf("resetting the login role's read-only default: %w", err)
		}
		var ext string
		if err := conn.QueryRow(ctx, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
			WHERE e.extname = 'vector'`).Scan(&ext); err != nil {
			return fmt.Errorf("finding pgvector's schema: %w", err)
		}
		if err := ensureGrants(ctx, conn, m.Schema, ext, names, &Result{}); err != nil {
			return err
		}
		if mk.frozen {
			if err := m.commentSchema(ctx, conn, m.Owner.marker()); err != nil {
				return err
			}
		}
		return endLoginSessions(ctx, conn, names.login)
	})
	if err != nil {
		return fmt.Errorf("lifting the freeze of schema %q on the source: %w", m.Schema, err)
	}
	return nil
}

// Frozen reports whether the source schema is frozen for a move (a moved
// source is, until dropped).
func (m Relocation) Frozen(ctx context.Context) (bool, error) {
	if err := m.validate(); err != nil {
		return false, err
	}
	c, err := m.Source.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("connecting to the source: %w", err)
	}
	defer c.Release()
	mk, err := m.sourceMarker(ctx, c.Conn())
	if err != nil {
		return false, err
	}
	return mk.frozen, nil
}

// MarkMoved rewrites the frozen source schema's marker to
// uid=<UID>+moved; to=<identity> (keeping the freeze): HoldsTenant and
// Provision no longer take it as this runtime's home (pointing the
// connection back at a stale copy is refused), DropMoved can drop it.
// Idempotent.
func (m Relocation) MarkMoved(ctx context.Context, to ServerIdentity) error {
	if err := m.validate(); err != nil {
		return err
	}
	err := withTenantLock(ctx, m.Source, m.Schema, func(conn *pgx.Conn) error {
		mk, err := m.sourceMarker(ctx, conn)
		if err != nil || mk.relocate == relocateMoved {
			return err
		}
		if !mk.frozen {
			return ErrRelocateNotFrozen
		}
		return m.commentSchema(ctx, conn, m.Owner.relocateMarker(relocateMoved, true, movedTo(to)))
	})
	if err != nil {
		return fmt.Errorf("marking schema %q moved on the source: %w", m.Schema, err)
	}
	return nil
}

// movedTo names a server in a marker: no ";" or "=", which end a field.
func movedTo(id ServerIdentity) string {
	db := strings.Map(func(r rune) rune {
		if r == ';' || r == '=' || r < ' ' {
			return '_'
		}
		return r
	}, id.Database)
	return fmt.Sprintf("%s/%s/%d", id.System, db, id.DatabaseOID)
}

// sourceMarker is the source schema's marker, which must be this runtime's
// home (frozen or not) or its moved copy.
func (m Relocation) sourceMarker(ctx context.Context, conn *pgx.Conn) (marker, error) {
	exists, mk, err := schemaState(ctx, conn, m.Schema)
	if err != nil {
		return mk, err
	}
	home := mk.uid == m.Owner.UID
	moved := mk.relocate == relocateMoved && mk.relocateUID == m.Owner.UID
	if !exists || !(home || moved) {
		return mk, fmt.Errorf("%w: schema %q", ErrRelocateSourceNotHome, m.Schema)
	}
	return mk, nil
}

func (m Relocation) commentSchema(ctx context.Context, conn *pgx.Conn, mark string) error {
	if _, err := conn.Exec(ctx, "COMMENT ON SCHEMA "+pgx.Identifier{m.Schema}.Sanitize()+" IS "+quoteLiteral(mark)); err != nil {
		return fmt.Errorf("marking schema %q: %w", m.Schema, err)
	}
	return nil
}

func currentDatabase(ctx context.Context, conn *pgx.Conn) (string, error) {
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		return "", fmt.Errorf("reading the database's name: %w", err)
	}
	return db, nil
}

// schemaTables lists the names of schema's tables.
func schemaTables(ctx context.Context, conn *pgx.Conn, schema string) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT relname::text FROM pg_class WHERE relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
		AND relkind IN ('r', 'p') ORDER BY relname`, schema)
	if err != nil {
		return nil, fmt.Errorf("listing the tables of %s: %w", schema, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("listing the tables of %s: %w", schema, err)
	}
	return names, nil
}

// endLoginSessions ends the sessions of role in the current database. An
// admin that may not (not a member of the role, no pg_signal_backend)
// grants itself the role once and tries again.
func endLoginSessions(ctx context.Context, conn *pgx.Conn, role string) error {
	end := func() error {
		_, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE usename = $1 AND datname = current_database() AND pid <> pg_backend_pid()`, role)
		return err
	}
	err := end()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		if err = actAs(ctx, conn, role); err == nil {
			err = end()
		}
	}
	if err != nil {
		return fmt.Errorf("ending the sessions of %s: %w", role, err)
	}
	return nil
}
