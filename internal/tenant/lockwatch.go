package tenant

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultLockWatchInterval is how often the lock watchdog looks (the
// operator flag --tenant-lock-watch-interval). One connection fills the
// shared lock table in about 6 s with nested savepoints: the look must be
// well inside that.
const DefaultLockWatchInterval = time.Second

// LockHog is a session of a tenant's login role that held more locks in
// the server's shared lock table than the watchdog's threshold.
type LockHog struct {
	PID   int
	Role  string
	Locks int
	// Tenant is the runtime named by the role's ownership marker.
	Tenant Owner
	// Ended: the watchdog ended the session (pg_terminate_backend).
	Ended bool
	// Problem says why it was not ended, for humans; empty when Ended.
	Problem string
}

// String names the session for events and logs.
func (h LockHog) String() string {
	return fmt.Sprintf("session %d of role %s (MemoryRuntime %s), holding %d locks", h.PID, h.Role, h.Tenant.Runtime(), h.Locks)
}

// LockWatchdog ends the sessions of tenants' login roles that hold too many
// locks in the server's shared lock table. Every lock of the server, of
// every database, lives in that one table (about max_locks_per_transaction
// × max_connections entries), and a login role can fill it on its own: each
// open savepoint that wrote something keeps a lock on its own transaction
// id until the transaction ends, PostgreSQL bounds neither the nesting nor
// the locks of a role, and no revoke can stop savepoints or writes. A full
// table fails every other session's statements and every new connection,
// the superuser's included, with "out of shared memory", for as long as
// the tenant's session lives (issue 26's third review).
//
// So the watchdog must work while the table is full, when any statement
// that opens a shared catalog (pg_roles, pg_stat_activity,
// shobj_description) fails. It holds its own connection, opened before
// trouble; it learns the tenants' roles while it can (Refresh); and its
// look uses only functions and numeric OIDs (pg_lock_status,
// pg_stat_get_activity), prepared beforehand. pg_terminate_backend looks
// the target's role up in pg_authid: the watchdog reads each tenant role
// through the same cache beforehand (pg_get_userbyid), so the lookup needs
// no lock then.
//
// A tenant is a login role, not a superuser, whose comment carries
// Engram's marker with a UID (as for the Reaper). Sessions of every
// database count: a login role may connect to any database that grants
// CONNECT to PUBLIC and write temporary tables there, and the table is
// shared by all. Use one LockWatchdog from one goroutine.
type LockWatchdog struct {
	conn *pgx.Conn
	// threshold: a tenant session holding more locks is ended.
	threshold int
	// roles are the tenants' login roles by OID, from the last Refresh
	// that succeeded.
	roles map[uint32]watchedRole
}

type watchedRole struct {
	name  string
	owner Owner
}

// Statements of the watchdog. hogsSQL and endSQL read no relation: they
// run while the lock table is full.
const (
	hogsSQL = `SELECT l.pid, s.usesysid, count(*)::int
		FROM pg_lock_status() l JOIN pg_stat_get_activity(NULL) s ON s.pid = l.pid
		WHERE NOT l.fastpath AND s.usesysid = ANY($1::oid[])
		GROUP BY l.pid, s.usesysid HAVING count(*) > $2`
	endSQL   = `SELECT pg_terminate_backend(s.pid) FROM pg_stat_get_activity($1::int) s WHERE s.usesysid = $2::oid`
	warmSQL  = `SELECT count(pg_get_userbyid(o)) FROM unnest($1::oid[]) o`
	rolesSQL = `SELECT r.oid, r.rolname, shobj_description(r.oid, 'pg_authid')
		FROM pg_roles r
		WHERE r.rolcanlogin AND NOT r.rolsuper AND r.rolname <> current_user
			AND shobj_description(r.oid, 'pg_authid') LIKE 'managed-by=engram%'`
)

// OpenLockWatchdog connects with cfg (an admin of the database, allowed to
// signal the tenants' backends: a superuser, or a member of
// pg_signal_backend), learns the tenants' roles and prepares its
// statements. threshold zero means twice max_locks_per_transaction: far
// above what Engram's own statements take, far below the table.
func OpenLockWatchdog(ctx context.Context, cfg *pgx.ConnConfig, threshold int) (*LockWatchdog, error) {
	cfg = cfg.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["statement_timeout"] = "5s"
	cfg.RuntimeParams["lock_timeout"] = "1s"
	cfg.RuntimeParams["application_name"] = "engram-lock-watchdog"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the lock watchdog's connection: %w", err)
	}
	w, err := NewLockWatchdog(ctx, conn, threshold)
	if err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return w, nil
}

// NewLockWatchdog is OpenLockWatchdog on a connection the caller opened
// (with a statement_timeout and a lock_timeout) and keeps: the watchdog
// prepares its statements on it. Close closes it.
func NewLockWatchdog(ctx context.Context, conn *pgx.Conn, threshold int) (*LockWatchdog, error) {
	w := &LockWatchdog{conn: conn, threshold: threshold}
	if err := w.open(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *LockWatchdog) open(ctx context.Context) error {
	if w.threshold <= 0 {
		if err := w.conn.QueryRow(ctx, `SELECT 2 * current_setting('max_locks_per_transaction')::int`).Scan(&w.threshold); err != nil {
			return fmt.Errorf("reading max_locks_per_transaction: %w", err)
		}
	}
	if err := w.Refresh(ctx); err != nil {
		return err
	}
	// Prepare both statements now (pgx keeps them per connection): the
	// parse and its catalog lookups happen before any trouble.
	for _, sql := range []string{hogsSQL, endSQL} {
		if _, err := w.conn.Prepare(ctx, sql, sql); err != nil {
			return fmt.Errorf("preparing the lock watchdog's statements: %w", err)
		}
	}
	return nil
}

// Threshold is the number of locks above which a tenant session is ended.
func (w *LockWatchdog) Threshold() int { return w.threshold }

// Close closes the watchdog's connection.
func (w *LockWatchdog) Close(ctx context.Context) error { return w.conn.Close(ctx) }

// Refresh learns the tenants' login roles again (new tenants) and reads
// each through the cache pg_terminate_backend will use. It reads shared
// catalogs, so it fails while the lock table is full: the roles of the
// last Refresh that succeeded stay.
func (w *LockWatchdog) Refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	rows, err := w.conn.Query(ctx, rolesSQL)
	if err != nil {
		return fmt.Errorf("listing the tenants' login roles: %w", err)
	}
	roles := map[uint32]watchedRole{}
	var oid uint32
	var name string
	var comment *string
	_, err = pgx.ForEachRow(rows, []any{&oid, &name, &comment}, func() error {
		if m := parseMarker(comment); m.managed && m.uid != "" {
			roles[oid] = watchedRole{name: name, owner: markedOwner(m)}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing the tenants' login roles: %w", err)
	}
	if _, err := w.conn.Exec(ctx, warmSQL, w.oids(roles)); err != nil {
		return fmt.Errorf("reading the tenants' login roles ahead: %w", err)
	}
	w.roles = roles
	return nil
}

func (w *LockWatchdog) oids(roles map[uint32]watchedRole) []uint32 {
	return slices.Sorted(func(yield func(uint32) bool) {
		for oid := range roles {
			if !yield(oid) {
				return
			}
		}
	})
}

// Look refreshes the roles when it can (an error there is not fatal: the
// table may be full), finds the tenant sessions over the threshold and
// ends them. It returns every session it found, ended or not. An error
// means it could not look.
func (w *LockWatchdog) Look(ctx context.Context) ([]LockHog, error) {
	_ = w.Refresh(ctx) // best effort: the last roles stay
	if len(w.roles) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	rows, err := w.conn.Query(ctx, hogsSQL, w.oids(w.roles), w.threshold)
	if err != nil {
		return nil, fmt.Errorf("looking for tenant sessions holding many locks: %w", err)
	}
	type hog struct {
		pid, locks int
		role       uint32
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (hog, error) {
		var h hog
		err := row.Scan(&h.pid, &h.role, &h.locks)
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("looking for tenant sessions holding many locks: %w", err)
	}
	out := make([]LockHog, 0, len(found))
	for _, f := range found {
		r := w.roles[f.role]
		h := LockHog{PID: f.pid, Role: r.name, Locks: f.locks, Tenant: r.owner}
		var ended bool
		switch err := w.conn.QueryRow(ctx, endSQL, f.pid, f.role).Scan(&ended); {
		case errors.Is(err, pgx.ErrNoRows):
			continue // it ended by itself meanwhile
		case err != nil:
			h.Problem = endProblem(err)
		case !ended:
			h.Problem = "pg_terminate_backend found no such session"
		default:
			h.Ended = true
		}
		out = append(out, h)
	}
	return out, nil
}
