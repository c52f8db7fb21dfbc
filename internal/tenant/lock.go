package tenant

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lockWait bounds how long provisioning waits for another operator that
// provisions the same schema.
const lockWait = 10 * time.Second

// leaseMargin is added to the caller's deadline to make the lease's expiry:
// the lease outlives the work it protects, and a crashed operator's lease
// frees itself soon after that work would have been cut off anyway.
const leaseMargin = 30 * time.Second

// defaultLease is the lease of a caller without a deadline.
const defaultLease = 5 * time.Minute

// withTenantLock runs fn on an admin connection while holding the tenant's
// provisioning lease, so provisioning, migrating and dropping one schema
// never overlap. The lease is a row of ControlSchema.provision_locks, which
// only the admin can read or write: an advisory lock lives in one keyspace
// per database that every role may take, so a tenant's login role could
// hold it and stall another tenant's provisioning. It is a lease (holder and
// expiry, set in short transactions), not a row lock held by an open
// transaction: CREATE INDEX CONCURRENTLY waits for every older transaction
// of the database, so a migration would wait for its own lock forever.
//
// The lease also records the holder's database session (pid and start
// time). An operator that dies mid-provisioning loses its connection, and
// its session ends with it: a lease whose session no longer exists is taken
// over at once, instead of after its expiry (which covers the longest
// migration, 30 minutes by default).
func withTenantLock(ctx context.Context, admin *pgxpool.Pool, schema string, fn func(*pgx.Conn) error) (err error) {
	c, err := admin.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("connecting as admin: %w", err)
	}
	defer c.Release()
	conn := c.Conn()
	defer func() { err = withRefusal(conn, err) }()
	// A Citus node Engram cannot use (a worker, no workers) is refused
	// before anything is written, the lease table included.
	citus, err := DetectCitus(ctx, conn)
	if err != nil {
		return err
	}
	if err := citus.check(); err != nil {
		return err
	}
	if err := ensureControlSchema(ctx, conn); err != nil {
		return err
	}
	l := lease{key: schema, doing: fmt.Sprintf("provisioning schema %q", schema), ttl: defaultLease}
	if d, ok := ctx.Deadline(); ok {
		l.ttl = time.Until(d) + leaseMargin
	}
	holder, err := takeLease(ctx, conn, l)
	if err != nil {
		return err
	}
	defer releaseLease(conn, schema, holder)
	return fn(conn)
}

// releaseLease gives the lease key back, with a fresh context: it is
// released even when the caller's context is done; if that fails, it
// expires by itself (or at once when this session ends).
func releaseLease(conn *pgx.Conn, key, holder string) {
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = conn.Exec(rctx, "UPDATE "+locksTable()+" SET holder = NULL, expires_at = NULL, holder_pid = NULL, holder_started = NULL WHERE schema_name = $1 AND holder = $2", key, holder)
}

func locksTable() string { return pgx.Identifier{ControlSchema, "provision_locks"}.Sanitize() }

// lease is one row of the lease table: key is a schema, or
// admissionLease's key; doing says what its holder does, for the error of
// a waiter; ttl is how long the lease lasts when its holder's session
// lives on but never releases it.
type lease struct {
	key, doing string
	ttl        time.Duration
}

// takeLease waits up to lockWait for the lease l and returns the holder
// id written into it.
func takeLease(ctx context.Context, conn *pgx.Conn, l lease) (string, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	holder := hex.EncodeToString(b)
	schema, ttl := l.key, l.ttl
	if _, err := conn.Exec(ctx, "INSERT INTO "+locksTable()+" (schema_name) VALUES ($1) ON CONFLICT DO NOTHING", schema); err != nil {
		return "", fmt.Errorf("taking the provisioning lease: %w", err)
	}
	give := time.Now().Add(lockWait)
	for {
		tag, err := conn.Exec(ctx, "UPDATE "+locksTable()+` AS l SET holder = $2, expires_at = now() + $3::interval,
				holder_pid = pg_backend_pid(),
				holder_started = (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())
			WHERE l.schema_name = $1 AND (l.holder IS NULL OR l.expires_at < now() OR NOT EXISTS (
				SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.holder_pid AND a.backend_start = l.holder_started))`,
			schema, holder, fmt.Sprintf("%d milliseconds", ttl.Milliseconds()))
		if err != nil {
			return "", fmt.Errorf("taking the provisioning lease: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return holder, nil
		}
		if time.Now().After(give) {
			return "", fmt.Errorf("another operator has been %s for over %s; retrying later", l.doing, lockWait)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ensureControlSchema creates ControlSchema and its lease table once. Nobody
// but the admin has any privilege on it. Passes that start together on a
// fresh server (an operator's first reconciles) race: CREATE ... IF NOT
// EXISTS lets one win, and the others' REVOKE or COMMENT on the new schema
// may fail with "tuple concurrently updated"; such a pass looks again. No
// advisory lock: any role with CONNECT may take one (a tenant held the
// key and stalled every first provisioning of a database: issue 26's
// seventh review).
func ensureControlSchema(ctx context.Context, conn *pgx.Conn) error {
	var err error
	var done bool
	for range controlSchemaAttempts {
		if done, err = createControlSchema(ctx, conn); done || err != nil && !concurrentlyUpdated(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("creating schema %s: %w", ControlSchema, err)
	}
	if !done {
		// Said here, not by the next statement's "relation does not exist".
		return fmt.Errorf("creating schema %s: lost the race to create it %d times", ControlSchema, controlSchemaAttempts)
	}
	return nil
}

// controlSchemaAttempts: a pass that lost the race finds the schema there
// on its second look; a few more cover a crowd.
const controlSchemaAttempts = 5

// createControlSchema creates the control schema unless it is complete;
// done when it is there after the call.
func createControlSchema(ctx context.Context, conn *pgx.Conn) (done bool, err error) {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
		WHERE attrelid = to_regclass($1) AND attname = 'holder_started' AND NOT attisdropped)`, locksTable()).Scan(&exists); err != nil {
		return false, fmt.Errorf("looking for %s: %w", locksTable(), err)
	}
	if exists {
		return true, nil
	}
	schema := pgx.Identifier{ControlSchema}.Sanitize()
	stmts := []string{
		// On Citus the leases stay local tables of the coordinator, even
		// where schema-based sharding is on for every new schema (a
		// placeholder setting, harmless on plain PostgreSQL).
		"SET LOCAL citus.enable_schema_based_sharding = off",
		"CREATE SCHEMA IF NOT EXISTS " + schema,
		"REVOKE ALL ON SCHEMA " + schema + " FROM PUBLIC",
		"COMMENT ON SCHEMA " + schema + " IS 'Engram operator bookkeeping (provisioning leases); not a tenant schema'",
		"CREATE TABLE IF NOT EXISTS " + locksTable() + " (schema_name text PRIMARY KEY)",
		"ALTER TABLE " + locksTable() + " ADD COLUMN IF NOT EXISTS holder text, ADD COLUMN IF NOT EXISTS expires_at timestamptz," +
			" ADD COLUMN IF NOT EXISTS holder_pid integer, ADD COLUMN IF NOT EXISTS holder_started timestamptz",
	}
	err = inTx(ctx, conn, "", func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "23505" || pgErr.Code == "42P06" || pgErr.Code == "42P07") {
		return false, nil // another pass created a part at the same moment: look again
	}
	return err == nil, err
}

// concurrentlyUpdated: the catalog row the statement changed was changed
// by a concurrent transaction (an internal error, XX000, told by its text).
func concurrentlyUpdated(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "XX000" && strings.Contains(pgErr.Message, "tuple concurrently updated")
}
