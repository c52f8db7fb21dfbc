package tenant

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultLockWatchInterval is how often the lock watchdog looks (the
// operator flag --tenant-lock-watch-interval). One connection fills the
// shared lock table in about 6 s with nested savepoints: the look must be
// well inside that.
const DefaultLockWatchInterval = time.Second

// DefaultLockTableShare is the share of the server's lock table, in
// percent, the sessions of one namespace's login roles may hold together
// (LockPolicy.TableShare).
const DefaultLockTableShare = 20

// Quarantine back-off of a role whose sessions were ended: the first lasts
// DefaultQuarantine, each repeat twice the last, up to DefaultMaxQuarantine.
const (
	DefaultQuarantine    = 30 * time.Second
	DefaultMaxQuarantine = 10 * time.Minute
)

// LockPolicy says when the lock watchdog ends a role's sessions and for how
// long it then refuses the role's logins.
type LockPolicy struct {
	// Threshold: a tenant session holding more locks gets its role ended
	// and quarantined. Zero means twice max_locks_per_transaction.
	Threshold int
	// TableShare is the percentage of the server's lock table the sessions
	// of one namespace's login roles may hold together; over it, every
	// role of the namespace is ended and quarantined. Zero means
	// DefaultLockTableShare.
	TableShare int
	// Quarantine and MaxQuarantine: the first back-off and its cap; zero
	// means the defaults.
	Quarantine, MaxQuarantine time.Duration
	// Connections is the provisioning's connection policy, to restore a
	// role's CONNECTION LIMIT when its quarantine ends.
	Connections ConnectionPolicy
	// MaxRoles is the most marked roles the watchdog reads and keeps
	// between looks; zero means maxWatchedRoles. A server a tenant runs
	// gets MaxTenantWatchedRoles.
	MaxRoles int
}

func (p LockPolicy) withDefaults() LockPolicy {
	if p.TableShare <= 0 {
		p.TableShare = DefaultLockTableShare
	}
	if p.Quarantine <= 0 {
		p.Quarantine = DefaultQuarantine
	}
	if p.MaxQuarantine <= 0 {
		p.MaxQuarantine = DefaultMaxQuarantine
	}
	if p.MaxRoles <= 0 || p.MaxRoles > maxWatchedRoles {
		p.MaxRoles = maxWatchedRoles
	}
	return p
}

// LockHog is a tenant login role the watchdog ended: one of its sessions
// held more locks than the threshold, or the sessions of its namespace
// together held more than the namespace's share of the lock table.
type LockHog struct {
	// PID is the role's session holding the most locks.
	PID  int
	Role string
	// Locks is what the role's sessions held together; Why says what was
	// over which bound.
	Locks int
	Why   string
	// Sessions is how many of the role's sessions were ended.
	Sessions int
	// Tenant is the runtime named by the role's ownership marker.
	Tenant Owner
	// Quarantine is how long the role's logins are refused (CONNECTION
	// LIMIT 0, restored after); zero when the watchdog could not set it
	// (QuarantineProblem says why; it tries again at the next look).
	Quarantine        time.Duration
	QuarantineProblem string
	// Ended: the watchdog ended the role's sessions (pg_terminate_backend).
	Ended bool
	// Problem says why they were not ended, for humans; empty when Ended.
	Problem string
}

// String names the role for events and logs.
func (h LockHog) String() string {
	return fmt.Sprintf("role %s (MemoryRuntime %s): %s", h.Role, h.Tenant.Runtime(), h.Why)
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
	conn   *pgx.Conn
	policy LockPolicy
	// budget: the sessions of one namespace's login roles holding more
	// locks together are all ended (policy.TableShare of the table).
	budget int
	// roles are the tenants' login roles by OID, from the last Refresh
	// that succeeded.
	roles map[uint32]watchedRole
	// quarantined are the roles whose logins are refused, by OID.
	quarantined map[uint32]*quarantine
}

type watchedRole struct {
	name  string
	owner Owner
	limit int // rolconnlimit at the last Refresh
	// comment is the role's marker, mark its quarantine state, at the
	// last Refresh (or as the watchdog last wrote them).
	comment string
	mark    quarantineMark
}

// group is what the watchdog sums a namespace's locks by: the marker's
// namespace, or the role itself when the marker names none.
func (r watchedRole) group() string {
	if r.owner.Namespace != "" {
		return "namespace " + r.owner.Namespace
	}
	return "role " + r.name
}

// Statements of the watchdog. locksSQL and endSQL read no relation: they
// run while the lock table is full.
const (
	locksSQL = `SELECT l.pid, s.usesysid, count(*)::int
		FROM pg_lock_status() l JOIN pg_stat_get_activity(NULL) s ON s.pid = l.pid
		WHERE NOT l.fastpath AND s.usesysid = ANY($1::oid[])
		GROUP BY l.pid, s.usesysid`
	endSQL = `SELECT coalesce(array_agg(s.pid) FILTER (WHERE pg_terminate_backend(s.pid)), '{}')::int[]
		FROM pg_stat_get_activity(NULL) s WHERE s.usesysid = $1::oid AND s.pid <> pg_backend_pid()`
	warmSQL = `SELECT count(pg_get_userbyid(o)) FROM unnest($1::oid[]) o`
	// tableSizeSQL is about the number of entries of the shared lock
	// table: max_locks_per_transaction × every process that may hold
	// locks (PostgreSQL sizes it so, plus some slack).
	tableSizeSQL = `SELECT current_setting('max_locks_per_transaction')::int * (
		current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int
		+ current_setting('autovacuum_max_workers')::int + current_setting('max_worker_processes')::int
		+ current_setting('max_wal_senders')::int + 1), 2 * current_setting('max_locks_per_transaction')::int`
)

// OpenLockWatchdog connects with cfg (an admin of the database, allowed to
// signal the tenants' backends, a superuser or a member of
// pg_signal_backend, and to alter their roles: CREATEROLE), learns the
// tenants' roles and prepares its statements.
func OpenLockWatchdog(ctx context.Context, cfg *pgx.ConnConfig, p LockPolicy) (*LockWatchdog, error) {
	cfg = cfg.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["statement_timeout"] = "5s"
	cfg.RuntimeParams["lock_timeout"] = "1s"
	cfg.RuntimeParams["application_name"] = "engram-lock-watchdog"
	// A quarantine it wrote (the limit 0 and the marker) survives a crash.
	cfg.RuntimeParams["synchronous_commit"] = "on"
	BoundMessages(&cfg.Config)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the lock watchdog's connection: %w", err)
	}
	w, err := NewLockWatchdog(ctx, conn, p)
	if err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return w, nil
}

// NewLockWatchdog is OpenLockWatchdog on a connection the caller opened
// (with a statement_timeout and a lock_timeout) and keeps: the watchdog
// prepares its statements on it. Close closes it.
func NewLockWatchdog(ctx context.Context, conn *pgx.Conn, p LockPolicy) (*LockWatchdog, error) {
	w := &LockWatchdog{conn: conn, policy: p.withDefaults(), quarantined: map[uint32]*quarantine{}}
	if err := w.open(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *LockWatchdog) open(ctx context.Context) error {
	var table, threshold int
	if err := w.conn.QueryRow(ctx, tableSizeSQL).Scan(&table, &threshold); err != nil {
		return fmt.Errorf("reading the size of the server's lock table: %w", err)
	}
	if w.policy.Threshold <= 0 {
		w.policy.Threshold = threshold
	}
	w.budget = max(table*min(w.policy.TableShare, 100)/100, w.policy.Threshold)
	if err := w.Refresh(ctx); err != nil {
		return err
	}
	// Prepare both statements now (pgx keeps them per connection): the
	// parse and its catalog lookups happen before any trouble.
	for _, sql := range []string{locksSQL, endSQL} {
		if _, err := w.conn.Prepare(ctx, sql, sql); err != nil {
			return fmt.Errorf("preparing the lock watchdog's statements: %w", err)
		}
	}
	return nil
}

// Threshold is the number of locks above which a tenant session is ended.
func (w *LockWatchdog) Threshold() int { return w.policy.Threshold }

// Budget is the number of locks the sessions of one namespace may hold
// together.
func (w *LockWatchdog) Budget() int { return w.budget }

// Close closes the watchdog's connection.
func (w *LockWatchdog) Close(ctx context.Context) error { return w.conn.Close(ctx) }

// Refresh learns the tenants' login roles again (new tenants) and reads
// each through the cache pg_terminate_backend will use. It reads shared
// catalogs, so it fails while the lock table is full: the roles of the
// last Refresh that succeeded stay. The quarantines recorded in the roles'
// markers (by this watchdog, another of the server or a previous leader)
// are taken in, and one whose limit is no longer 0 is applied again at
// this look.
func (w *LockWatchdog) Refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	roles, err := w.markedRoles(ctx)
	if err != nil {
		return err
	}
	if _, err := w.conn.Exec(ctx, warmSQL, w.oids(roles)); err != nil {
		return fmt.Errorf("reading the tenants' login roles ahead: %w", err)
	}
	w.roles = roles
	w.pruneQuarantines()
	w.syncQuarantines(time.Now())
	return nil
}

func (w *LockWatchdog) oids(roles map[uint32]watchedRole) []uint32 {
	return slices.Sorted(maps.Keys(roles))
}

// session is one tenant session's count of locks in the shared table.
type session struct {
	pid, locks int
	role       uint32
}

// Look refreshes the roles when it can (an error there is not fatal: the
// table may be full), restores the roles whose quarantine is over, counts
// the locks of every tenant session and ends, and quarantines, every role
// with a session over the threshold and every role of a namespace whose
// sessions together hold more than the budget. It returns every role it
// acted on. An error means it could not look.
func (w *LockWatchdog) Look(ctx context.Context) ([]LockHog, error) {
	_ = w.Refresh(ctx) // best effort: the last roles stay
	if len(w.roles) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	w.restoreQuarantines(ctx, time.Now())
	rows, err := w.conn.Query(ctx, locksSQL, w.oids(w.roles))
	if err != nil {
		return nil, fmt.Errorf("looking for tenant sessions holding many locks: %w", err)
	}
	// Bounded: offenders keeps each and may end a role for each.
	var s session
	sessions, err := readSessions(rows, &s, []any{&s.pid, &s.role, &s.locks}, "tenant sessions holding locks")
	if err != nil {
		return nil, fmt.Errorf("looking for tenant sessions holding many locks: %w", err)
	}
	var out []LockHog
	for _, o := range w.offenders(sessions) {
		out = append(out, w.end(ctx, o))
	}
	// Sessions that logged in before a quarantine took hold.
	w.endQuarantined(ctx)
	return out, nil
}

// offender is a role the watchdog ends.
type offender struct {
	oid uint32
	hog LockHog
}

// offenders sums the sessions by role and by namespace and returns the
// roles to end, each with why, sorted by role name: every role with a
// session over the threshold, and every known role of a namespace whose
// sessions together are over the budget (those holding nothing too: they
// would take the freed room at once).
func (w *LockWatchdog) offenders(sessions []session) []offender {
	byRole := map[uint32]*LockHog{}
	top := map[uint32]int{}
	groups := map[string]int{}
	for _, s := range sessions {
		r, ok := w.roles[s.role]
		if !ok {
			continue
		}
		h := byRole[s.role]
		if h == nil {
			h = &LockHog{Role: r.name, Tenant: r.owner}
			byRole[s.role] = h
		}
		h.Locks += s.locks
		groups[r.group()] += s.locks
		if s.locks > top[s.role] {
			top[s.role], h.PID = s.locks, s.pid
		}
		if s.locks > w.policy.Threshold && h.Why == "" {
			h.Why = fmt.Sprintf("its session %d held %d locks in the server's shared lock table, which every tenant of the server shares; a tenant's session may hold at most %d",
				s.pid, s.locks, w.policy.Threshold)
		}
	}
	for oid, r := range w.roles {
		sum := groups[r.group()]
		if sum <= w.budget {
			continue
		}
		h := byRole[oid]
		if h == nil {
			h = &LockHog{Role: r.name, Tenant: r.owner}
			byRole[oid] = h
		}
		if h.Why == "" {
			h.Why = fmt.Sprintf("the sessions of the login roles of %s held %d locks together in the server's shared lock table, which every tenant of the server shares; one namespace may hold at most %d (%d %% of the table)",
				r.group(), sum, w.budget, w.policy.TableShare)
		}
	}
	var out []offender
	for oid, h := range byRole {
		if h.Why != "" {
			out = append(out, offender{oid: oid, hog: *h})
		}
	}
	slices.SortFunc(out, func(a, b offender) int { return strings.Compare(a.hog.Role, b.hog.Role) })
	return out
}
