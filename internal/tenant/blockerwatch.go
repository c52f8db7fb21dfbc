package tenant

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// lookTimeout bounds one look of the watcher (two short catalog queries).
const lookTimeout = 10 * time.Second

// blockerWatch watches one provisioning session (pid) for the sessions it
// waits for; see BlockerPolicy.
type blockerWatch struct {
	cfg    *pgx.ConnConfig
	pid    int
	self   Owner
	policy BlockerPolicy

	conn   *pgx.Conn
	seen   map[blockerKey]*seenBlocker
	waited time.Duration // time spent waiting for other tenants' sessions

	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	// unresolved: blockers reported and not ended, for the error message;
	// at most maxUnresolvedBlockers, the others only counted (notKept).
	unresolved map[blockerKey]Blocker
	notKept    int
}

// maxUnresolvedBlockers bounds the blockers a watch keeps for the error
// of its provisioning: the keys are the (pid, role) a server names, and a
// tenant-run server naming 10,000 new blockers a look, each failing its
// terminate, made the watch keep all of them for the whole pass, then join
// them into one error string (issue 26's twelfth review, HIGH 2; about
// 450 MiB for one 60 s pass). Each one was reported as it came.
const maxUnresolvedBlockers = 16

// blockerKey tells sessions apart even when a pid is reused.
type blockerKey struct {
	pid  int
	role uint32
}

type seenBlocker struct {
	first    time.Time
	reported bool // a problem with it was reported
	ended    bool
}

// startBlockerWatch starts watching session pid, provisioned for self, on a
// connection of its own made from cfg (the admin's; not from the pool, whose
// connections may all be provisioning).
func startBlockerWatch(ctx context.Context, cfg *pgx.ConnConfig, pid int, self Owner, p BlockerPolicy) *blockerWatch {
	ctx, cancel := context.WithCancel(ctx)
	cfg = cfg.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = "engram-operator-blocker-watch"
	BoundMessages(&cfg.Config)
	w := &blockerWatch{cfg: cfg, pid: pid, self: self, policy: p, seen: map[blockerKey]*seenBlocker{},
		unresolved: map[blockerKey]Blocker{}, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

// stop ends the watch and returns the blockers it reported and did not
// end, ordered by pid: at most maxUnresolvedBlockers of them (notKept
// counts the others).
func (w *blockerWatch) stop() []Blocker {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Blocker, 0, len(w.unresolved))
	for _, b := range w.unresolved {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Blocker) int { return a.PID - b.PID })
	return out
}

// notKeptCount is how many blockers were reported and not ended beyond
// those stop returns (some may have ended since: a blocker not kept is
// not followed).
func (w *blockerWatch) notKeptCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.notKept
}

func (w *blockerWatch) run(ctx context.Context) {
	defer close(w.done)
	defer func() {
		if w.conn != nil {
			_ = w.conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(w.policy.interval())
	defer tick.Stop()
	last := time.Now()
	var panics int
	var paused time.Time // no look before, after a panic
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if now.Before(paused) {
				continue // last stays: the next look counts the pause as waited
			}
			err := w.lookSafely(ctx, now.Sub(last))
			if errors.Is(err, errLookPanicked) {
				panics++
				paused = now.Add(min(w.policy.interval()<<min(panics, 16), maxBlockerWatchBackoff))
			}
			if err != nil && w.conn != nil {
				// A broken or timed-out session is replaced at the next
				// look; the provisioning itself is not disturbed.
				_ = w.conn.Close(context.Background())
				w.conn = nil
			}
			last = now
		}
	}
}

// maxBlockerWatchBackoff caps the pause of a watch whose looks panic.
const maxBlockerWatchBackoff = 30 * time.Second

// errLookPanicked: a look of the watch panicked (lookSafely).
var errLookPanicked = errors.New("the blocker watch's look panicked")

// lookSafely is look, with a panic taken as a failed look: logged (with
// the logger of ctx, the provisioning's), the connection closed and the
// watch paused, doubling up to maxBlockerWatchBackoff. The watch runs in
// a goroutine of its own, where nothing else recovers: a panic there (of
// the Report the controller gave, or of reading what a tenant's server
// said) ended the operator, every tenant's provisioning, watchdog and
// reaper with it (issue 26's eighth review; the node runner recovers the
// same way).
func (w *blockerWatch) lookSafely(ctx context.Context, elapsed time.Duration) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errLookPanicked, p)
			logr.FromContextOrDiscard(ctx).Error(err, "the look pauses and tries again; the provisioning is not disturbed",
				"pid", w.pid, "stack", string(debug.Stack()))
		}
	}()
	return w.look(ctx, elapsed)
}

// blockingSession is one row of blockingSessions.
type blockingSession struct {
	pid     int
	roleOID uint32
	role    string
	canBe   bool // a login role that is not a superuser
	admin   bool // the role the watcher runs as: another operator session
	comment *string
	xactAge *float64 // seconds; nil when the admin may not see it
}

// look asks who blocks the session now and acts on each blocker.
func (w *blockerWatch) look(ctx context.Context, elapsed time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, lookTimeout)
	defer cancel()
	if w.conn == nil {
		conn, err := pgx.ConnectConfig(ctx, w.cfg)
		if err != nil {
			return err
		}
		w.conn = conn
	}
	sessions, err := blockingSessions(ctx, w.conn, w.pid)
	if err != nil {
		return err
	}
	now := time.Now()
	present := map[blockerKey]bool{}
	var others bool
	for _, s := range sessions {
		key := blockerKey{s.pid, s.roleOID}
		present[key] = true
		if w.seen[key] == nil {
			w.seen[key] = &seenBlocker{first: now}
		}
		if w.classify(s).Kind == BlockerOtherTenant {
			others = true
		}
	}
	for key := range w.seen {
		if !present[key] {
			delete(w.seen, key)
		}
	}
	if others {
		w.waited += elapsed
	}
	ends := newLookEnds(ctx)
	defer ends.done()
	for _, s := range sessions {
		key := blockerKey{s.pid, s.roleOID}
		w.act(ends, key, s, w.seen[key], now)
	}
	if w.policy.LookDone != nil {
		w.policy.LookDone()
	}
	return nil
}

// blockingSessions lists the sessions pid waits for, with their role, its
// ownership comment and the age of their transaction.
func blockingSessions(ctx context.Context, conn *pgx.Conn, pid int) ([]blockingSession, error) {
	rows, err := conn.Query(ctx, `SELECT a.pid, a.usesysid, coalesce(r.rolname, ''),
			coalesce(r.rolcanlogin AND NOT r.rolsuper, false), coalesce(r.rolname = current_user, false),
			shobj_description(a.usesysid, 'pg_authid'),
			extract(epoch FROM clock_timestamp() - a.xact_start)::float8
		FROM unnest(pg_blocking_pids($1)) AS b(pid)
		JOIN pg_stat_activity a ON a.pid = b.pid
		LEFT JOIN pg_roles r ON r.oid = a.usesysid`, pid)
	if err != nil {
		return nil, fmt.Errorf("looking for sessions that block the provisioning: %w", err)
	}
	// Bounded: the watch keeps each (seen) and may end each.
	var s blockingSession
	out, err := readSessions(rows, &s, []any{&s.pid, &s.roleOID, &s.role, &s.canBe, &s.admin, &s.comment, &s.xactAge}, "sessions blocking the provisioning")
	if err != nil {
		return nil, fmt.Errorf("looking for sessions that block the provisioning: %w", err)
	}
	return out, nil
}

// readSessions reads the sessions rows returns, each scanned into *s by
// dest, at most maxServerSessions of them (a TooManyRowsError naming what
// past that); nil when there are none.
func readSessions[T any](rows pgx.Rows, s *T, dest []any, what string) ([]T, error) {
	var out []T
	_, err := pgx.ForEachRow(rows, dest, func() error {
		if len(out) == maxServerSessions {
			return &TooManyRowsError{What: what, Limit: maxServerSessions}
		}
		out = append(out, *s)
		return nil
	})
	return out, err
}

// classify says whose session s is: only a login role whose marker carries
// a UID is a tenant (the marker is a role comment, which only a role with
// CREATEROLE can write: a tenant cannot forge one).
func (w *blockerWatch) classify(s blockingSession) Blocker {
	b := Blocker{PID: s.pid, Role: s.role, Kind: BlockerNotTenant}
	m := parseMarker(s.comment)
	if !s.canBe || !m.managed || m.uid == "" {
		return b
	}
	b.Tenant = Owner{UID: m.uid}
	if ns, name, ok := splitRuntime(m.runtime); ok {
		b.Tenant.Namespace, b.Tenant.Name = ns, name
	}
	b.Kind = BlockerOtherTenant
	if m.uid == w.self.UID {
		b.Kind = BlockerSameTenant
	}
	return b
}

// blockerAction is what the watcher does about a blocker at one look.
type blockerAction int

const (
	blockerWait   blockerAction = iota // not (yet) in the way for long enough
	blockerEnd                         // end the session
	blockerReport                      // never ended: report it
)

// decideBlocker is the watcher's rule. openFor is how long the blocker's
// transaction has been open (at least inWay), inWay how long it has been
// in the way of this provisioning, waited how long this provisioning has
// waited for other tenants' sessions in total, interval the time between
// two looks. Once the total is spent, another tenant's session is ended as
// soon as a second look finds it still in the way: a query that merely
// happened to run at one look (a service's search, say) is left alone.
func decideBlocker(kind BlockerKind, openFor, inWay, waited, maxAge, interval time.Duration) blockerAction {
	switch {
	case kind == BlockerOtherTenant && (openFor >= maxAge || (waited >= maxAge && inWay >= interval)):
		return blockerEnd
	case kind == BlockerOtherTenant || inWay < maxAge:
		return blockerWait
	default:
		return blockerReport
	}
}

// act applies decideBlocker to s: it ends another tenant's session (trying
// again at every look until it is gone) and reports it once ended, or
// once when it cannot or may not be ended.
//
// Its terminates share the look's deadline (lookEnds): once it has passed
// or the watch is stopped, a blocker to end is left for the next look.
func (w *blockerWatch) act(ends *lookEnds, key blockerKey, s blockingSession, st *seenBlocker, now time.Time) {
	if st.ended {
		return
	}
	b := w.classify(s)
	inWay := now.Sub(st.first)
	b.OpenFor = inWay
	if s.xactAge != nil {
		b.OpenFor = max(b.OpenFor, time.Duration(*s.xactAge*float64(time.Second)))
	}
	b.Waited = w.waited
	switch decideBlocker(b.Kind, b.OpenFor, inWay, w.waited, w.policy.maxAge(), w.policy.interval()) {
	case blockerWait:
		return
	case blockerEnd:
		// Not cancelled by stop: the session ending unblocks the
		// provisioning, which may then finish and stop the watch while
		// the answer is on its way; the report must not be lost.
		if !ends.more() {
			return
		}
		signalled, err := terminate(ends.ctx, w.conn, s)
		ends.after()
		switch {
		case err != nil:
			b.Problem = endProblem(err)
		case !signalled:
			return // it ended by itself meanwhile
		default:
			b.Ended, st.ended = true, true
		}
	case blockerReport:
		b.Problem = keptProblem(b.Kind, s.admin)
	}
	if !b.Ended && st.reported {
		return
	}
	st.reported = st.reported || !b.Ended
	w.keepUnresolved(key, b)
	if w.policy.Report != nil {
		w.policy.Report(b)
	}
}

// keepUnresolved records b for the error of the provisioning: dropped once
// ended, kept while fewer than maxUnresolvedBlockers are, counted else.
func (w *blockerWatch) keepUnresolved(key blockerKey, b Blocker) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, kept := w.unresolved[key]
	switch {
	case b.Ended:
		delete(w.unresolved, key)
	case kept || len(w.unresolved) < maxUnresolvedBlockers:
		w.unresolved[key] = b
	default:
		w.notKept++
	}
}

// keptProblem says why a blocker is never ended.
func keptProblem(kind BlockerKind, admin bool) string {
	switch {
	case kind == BlockerSameTenant:
		return "a session of the runtime's own login role: the operator ends only other tenants' sessions"
	case admin:
		return "a session of the operator's admin role (another tenant's migration, say): the operator never ends it"
	default:
		return "not the login role of an Engram tenant: the operator never ends it"
	}
}

// terminate ends session s if it is still the same session (pid and role);
// it reports whether it signalled one.
func terminate(ctx context.Context, conn *pgx.Conn, s blockingSession) (bool, error) {
	var ended bool
	err := conn.QueryRow(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND usesysid = $2`,
		s.pid, s.roleOID).Scan(&ended)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return ended, err
}

// endProblem explains a failed pg_terminate_backend.
func endProblem(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return "the operator may not end it: grant pg_signal_backend to the admin role of the connection (see docs/security.md)"
	}
	return fmt.Sprintf("ending it failed: %v", err)
}

// splitRuntime splits "<namespace>/<name>".
func splitRuntime(r string) (string, string, bool) {
	ns, name, ok := strings.Cut(r, "/")
	return ns, name, ok && ns != "" && name != ""
}
