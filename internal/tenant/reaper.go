package tenant

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultReaperInterval is how often the operator looks for old tenant
// transactions on each database it manages (the operator flag
// --tenant-reaper-interval).
const DefaultReaperInterval = 30 * time.Second

// ErrReaperOnCitus: the reaper does not look at a Citus coordinator. The
// tenants' rows live on the workers, and a tenant's VACUUM through the
// coordinator holds a snapshot there (not a lazy VACUUM's) for as long as
// the workers vacuum: the coordinator's view cannot tell it from a held
// snapshot. The reaper looks at each worker instead (CitusWorkerConfigs),
// where that VACUUM is a lazy one and a tenant's login role may hold a
// snapshot of its own, logged in directly.
var ErrReaperOnCitus = errors.New("the transaction reaper does not run on a Citus coordinator (the tenants' rows live on its workers, which it looks at instead)")

// HeldTransaction is a session of a tenant's login role whose transaction
// had been holding back the database's cleanup horizon for longer than the
// reaper's maximum age.
type HeldTransaction struct {
	PID  int
	Role string
	// Tenant is the runtime named by the role's ownership marker.
	Tenant Owner
	// OpenFor is how long its transaction had been open (at least how long
	// the reaper had seen it, when PostgreSQL does not show the admin the
	// transaction's start: no pg_read_all_stats).
	OpenFor time.Duration
	// Ended: the operator ended the session (pg_terminate_backend).
	Ended bool
	// Problem says why it was not ended, for humans; empty when Ended.
	Problem string
}

// String names the session for events and logs.
func (h HeldTransaction) String() string {
	return fmt.Sprintf("session %d of role %s (MemoryRuntime %s)", h.PID, h.Role, h.Tenant.Runtime())
}

// Reaper ends the sessions of tenants' login roles whose transaction has
// held back the cleanup of the whole database for too long. Any login role
// can keep a snapshot (or a transaction id) for as long as it likes, its
// timeouts SET away; PostgreSQL then keeps every row version deleted or
// updated since, in every schema of the database: no VACUUM removes
// another tenant's dead rows, and their pages lose the all-visible bit
// that index-only scans rely on. The provisioning watcher (BlockerPolicy)
// bounds this only while the operator provisions; the reaper bounds it
// always.
//
// Only a login role, not a superuser, whose comment carries Engram's
// marker with a UID is a tenant (the marker is a role comment that only a
// role with CREATEROLE can write). Every other session — the admin's, a
// DBA's, another application's, a legacy role without a UID — is never
// looked at. A lazy VACUUM is left alone: PostgreSQL ignores its snapshot
// when it computes the horizon.
//
// A Reaper remembers, between looks, when it first saw each transaction
// (for admins that may not see its start) and what it reported; use one
// Reaper per database, from one goroutine.
type Reaper struct {
	// MaxAge: a transaction that holds back the horizon is ended once it
	// has been open this long. Zero means DefaultBlockerMaxAge.
	MaxAge time.Duration

	seen  map[heldKey]heldSeen
	epoch time.Time // when seen was made
}

// heldKey names one transaction: its session, the session's role, and its
// virtual transaction id, which PostgreSQL shows everyone (pg_locks) and
// which changes with every new transaction of the session. The virtual
// transaction id is kept as its two numbers, never as the server's
// string: the reaper keeps a key per listed session between looks, and a
// tenant's server listing 10,000 sessions with 3 KiB ids made each node
// keep 30 MiB (issue 26's tenth review, MEDIUM 1).
type heldKey struct {
	pid  int32
	role uint32
	vxid virtualXID
}

// virtualXID is a virtual transaction id, procNumber/localXID.
type virtualXID struct {
	proc  int32
	local uint32
}

// parseVirtualXID reads a virtual transaction id as pg_locks shows it; ok
// is false for anything else.
func parseVirtualXID(s string) (v virtualXID, ok bool) {
	p, l, found := strings.Cut(s, "/")
	if !found {
		return v, false
	}
	proc, err1 := strconv.ParseInt(p, 10, 32)
	local, err2 := strconv.ParseUint(l, 10, 32)
	if err1 != nil || err2 != nil {
		return v, false
	}
	return virtualXID{proc: int32(proc), local: uint32(local)}, true
}

func (v virtualXID) String() string {
	return strconv.FormatInt(int64(v.proc), 10) + "/" + strconv.FormatUint(uint64(v.local), 10)
}

// heldSeen is what the reaper keeps of a transaction between looks, for
// up to maxHorizonHolders of them on each node: 16 bytes.
type heldSeen struct {
	first    time.Duration // when it was first seen, after the reaper's epoch (monotonic)
	reported bool          // a problem with it was reported
}

func (r *Reaper) maxAge() time.Duration {
	if r.MaxAge <= 0 {
		return DefaultBlockerMaxAge
	}
	return r.MaxAge
}

// Look finds, on db's database, the sessions of tenants' login roles whose
// transaction holds back the horizon and has been open for the maximum
// age, and ends them. It returns each session it ended, and once each
// session it could not end (Problem says why). On a Citus coordinator it
// ends nothing and returns ErrReaperOnCitus; on a Citus worker it looks as
// on any database. An error means it ended nothing:
// it fails only before it acts.
func (r *Reaper) Look(ctx context.Context, db querier) ([]HeldTransaction, error) {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	coordinator, err := citusCoordinator(ctx, db)
	if err != nil {
		return nil, err
	}
	if coordinator {
		return nil, ErrReaperOnCitus
	}
	sessions, err := horizonHolders(ctx, db)
	if err != nil {
		return nil, err
	}
	if r.seen == nil {
		r.seen, r.epoch = map[heldKey]heldSeen{}, time.Now()
	}
	now := time.Now()
	present := map[heldKey]bool{}
	var out []HeldTransaction
	ends := newLookEnds(ctx)
	defer ends.done()
	for _, s := range sessions {
		m := parseMarker(s.comment)
		if !m.managed || m.uid == "" {
			continue // never a tenant: see Reaper
		}
		key := heldKey{s.pid, s.roleOID, s.vxid}
		present[key] = true
		st, ok := r.seen[key]
		if !ok {
			st = heldSeen{first: now.Sub(r.epoch)}
			r.seen[key] = st
		}
		h := HeldTransaction{PID: int(s.pid), Role: s.role, Tenant: markedOwner(m), OpenFor: now.Sub(r.epoch) - st.first}
		if s.xactAge != nil {
			h.OpenFor = max(h.OpenFor, time.Duration(*s.xactAge*float64(time.Second)))
		}
		if h.OpenFor < r.maxAge() {
			continue
		}
		if !ends.more() {
			continue // found again at the next look
		}
		if r.end(ends, db, key, &h) {
			out = append(out, h)
		}
	}
	for key := range r.seen {
		if !present[key] {
			delete(r.seen, key)
		}
	}
	slices.SortFunc(out, func(a, b HeldTransaction) int { return a.PID - b.PID })
	return out, nil
}

// end ends the transaction of key and says whether h is to be reported:
// always once ended, once when it cannot be ended.
// Its terminate shares the look's deadline (lookEnds).
func (r *Reaper) end(ends *lookEnds, db querier, key heldKey, h *HeldTransaction) bool {
	ended, err := terminateTransaction(ends.ctx, db, key)
	ends.after()
	switch {
	case err != nil:
		h.Problem = endProblem(err)
	case !ended:
		return false // it ended by itself meanwhile
	default:
		h.Ended = true
		delete(r.seen, key)
		return true
	}
	st := r.seen[key]
	if st.reported {
		return false
	}
	st.reported = true
	r.seen[key] = st
	return true
}

// querier is what a look needs of a pool or a connection.
type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}

// horizonHolder is one row of horizonHolders.
type horizonHolder struct {
	pid     int32
	roleOID uint32
	role    string
	comment *string
	vxid    virtualXID
	xactAge *float64 // seconds; nil when the admin may not see it
}

// maxVirtualXIDBytes is the longest virtual transaction id horizonHolders
// reads: a real one is two 32-bit numbers and a slash, at most 22 bytes.
const maxVirtualXIDBytes = 64

// horizonHolders lists the sessions of the database, of login roles that
// are not superusers and carry Engram's marker (checked again in Go), that
// hold back the horizon now: a snapshot (backend_xmin) or a transaction id
// (backend_xid), both of which PostgreSQL shows every role, unlike
// xact_start (pg_read_all_stats). Lazy VACUUMs are left out (their
// snapshot is ignored), and so are the admin's own sessions.
func horizonHolders(ctx context.Context, db querier) ([]horizonHolder, error) {
	rows, err := db.Query(ctx, `SELECT a.pid, a.usesysid, r.rolname, shobj_description(a.usesysid, 'pg_authid'),
			l.virtualxid, extract(epoch FROM clock_timestamp() - a.xact_start)::float8
		FROM pg_stat_activity a
		JOIN pg_roles r ON r.oid = a.usesysid
		JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'virtualxid' AND l.mode = 'ExclusiveLock' AND l.granted
		WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
			AND r.rolcanlogin AND NOT r.rolsuper AND r.rolname <> current_user
			AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
			AND a.pid NOT IN (SELECT pid FROM pg_stat_progress_vacuum)
			AND shobj_description(a.usesysid, 'pg_authid') LIKE 'managed-by=engram%'`)
	if err != nil {
		return nil, fmt.Errorf("looking for tenant transactions that hold back cleanup: %w", err)
	}
	defer rows.Close()
	// Bounded in rows (Look keeps an entry and may end a session for
	// each) and in bytes a row: a row with a field longer than any real
	// one is skipped before it is copied, as markedRoles does.
	var out []horizonHolder
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != 6 || len(raw[2]) > maxRoleNameBytes || len(raw[3]) > maxMarkerBytes || len(raw[4]) > maxVirtualXIDBytes {
			continue // not a session of a tenant's role: not kept
		}
		if len(out) == maxHorizonHolders {
			return nil, fmt.Errorf("looking for tenant transactions that hold back cleanup: %w",
				&TooManyRowsError{What: "tenant sessions holding back cleanup", Limit: maxHorizonHolders})
		}
		var h horizonHolder
		var vxid string
		if err := rows.Scan(&h.pid, &h.roleOID, &h.role, &h.comment, &vxid, &h.xactAge); err != nil {
			return nil, fmt.Errorf("looking for tenant transactions that hold back cleanup: %w", err)
		}
		var ok bool
		if h.vxid, ok = parseVirtualXID(vxid); ok {
			out = append(out, h)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("looking for tenant transactions that hold back cleanup: %w", err)
	}
	return out, nil
}

// terminateTransaction ends the session of key if it is still in that very
// transaction (same pid, role and virtual transaction id): a session that
// committed meanwhile and began anew is left alone. It reports whether it
// signalled one. ctx is the look's shared, cancel-proof deadline
// (lookEnds).
func terminateTransaction(ctx context.Context, db querier, key heldKey) (bool, error) {
	var ended bool
	err := db.QueryRow(ctx, `SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a
		WHERE a.pid = $1 AND a.usesysid = $2 AND EXISTS (SELECT 1 FROM pg_locks l
			WHERE l.pid = a.pid AND l.locktype = 'virtualxid' AND l.virtualxid = $3 AND l.mode = 'ExclusiveLock' AND l.granted)`,
		key.pid, key.role, key.vxid.String()).Scan(&ended)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return ended, err
}

// markedOwner is the runtime a marker with a UID names.
func markedOwner(m marker) Owner {
	o := Owner{UID: m.uid}
	if ns, name, ok := splitRuntime(m.runtime); ok {
		o.Namespace, o.Name = ns, name
	}
	return o
}
