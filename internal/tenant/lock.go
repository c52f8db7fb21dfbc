package tenant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lockWait bounds how long provisioning waits for another operator that
// provisions the same schema.
const lockWait = 10 * time.Second

// withTenantLock runs fn on an admin connection while holding the tenant's
// provisioning lock, so provisioning, migrating and dropping one schema never
// overlap. The lock is a row lock in ControlSchema, which only the admin
// can read: an advisory lock lives in one keyspace per database that every
// role may take, so a tenant's login role could hold it and stall another
// tenant's provisioning. The row lock is held by a transaction on a
// connection of its own (not from the pool: waiting for a second pooled
// connection while holding one could exhaust a small pool); no transaction
// of fn stays open around it.
func withTenantLock(ctx context.Context, admin *pgxpool.Pool, schema string, fn func(*pgx.Conn) error) error {
	c, err := admin.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connecting as admin: %w", err)
	}
	defer c.Release()
	if err := ensureControlSchema(ctx, c.Conn()); err != nil {
		return err
	}
	lockConn, err := pgx.ConnectConfig(ctx, admin.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connecting as admin for the provisioning lock: %w", err)
	}
	defer func() { _ = lockConn.Close(context.Background()) }()
	tx, err := lockConn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("taking the provisioning lock: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	locks := pgx.Identifier{ControlSchema, "provision_locks"}.Sanitize()
	stmts := []string{
		fmt.Sprintf("SET LOCAL lock_timeout = %d", lockWait.Milliseconds()),
		"INSERT INTO " + locks + " (schema_name) VALUES ($1) ON CONFLICT DO NOTHING",
		"SELECT 1 FROM " + locks + " WHERE schema_name = $1 FOR UPDATE",
	}
	for i, s := range stmts {
		var args []any
		if i > 0 {
			args = []any{schema}
		}
		if _, err := tx.Exec(ctx, s, args...); err != nil {
			if isLockTimeout(err) {
				return fmt.Errorf("another operator has been provisioning schema %q for over %s; retrying later", schema, lockWait)
			}
			return fmt.Errorf("taking the provisioning lock: %w", err)
		}
	}
	if err := fn(c.Conn()); err != nil {
		return err
	}
	// Commit keeps the lock row, so the next provisioning writes nothing new.
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("releasing the provisioning lock: %w", err)
	}
	return nil
}

// ensureControlSchema creates ControlSchema and its lock table once. Nobody
// but the admin has any privilege on it.
func ensureControlSchema(ctx context.Context, conn *pgx.Conn) error {
	var exists bool
	table := pgx.Identifier{ControlSchema, "provision_locks"}.Sanitize()
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
		return fmt.Errorf("looking for %s: %w", table, err)
	}
	if exists {
		return nil
	}
	schema := pgx.Identifier{ControlSchema}.Sanitize()
	stmts := []string{
		"CREATE SCHEMA IF NOT EXISTS " + schema,
		"REVOKE ALL ON SCHEMA " + schema + " FROM PUBLIC",
		"COMMENT ON SCHEMA " + schema + " IS 'Engram operator bookkeeping (provisioning locks); not a tenant schema'",
		"CREATE TABLE IF NOT EXISTS " + table + " (schema_name text PRIMARY KEY)",
	}
	err := inTx(ctx, conn, "", func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return nil // another operator created it at the same moment
	}
	if err != nil {
		return fmt.Errorf("creating schema %s: %w", ControlSchema, err)
	}
	return nil
}

// isLockTimeout reports whether err is PostgreSQL's lock_not_available.
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}
