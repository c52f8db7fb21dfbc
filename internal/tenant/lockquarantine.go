package tenant

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// quarantine is a role whose logins the watchdog refuses: ending its
// sessions alone does not bound a tenant that reconnects at once and fills
// the table again between two looks (issue 26's fourth review: 24 sessions
// in parallel failed two thirds of another tenant's writes while the
// watchdog ran every second). So its CONNECTION LIMIT goes to 0 until the
// back-off ends; the back-off doubles on each repeat.
//
// The state lives in the role's marker on the server (quarantinemarker.go),
// written in the same transaction as the limit: every watchdog of the
// server and a new leader read it there. This is the watchdog's copy, kept
// for the looks at which the catalogs cannot be read (a full table).
type quarantine struct {
	name    string
	until   time.Time
	strikes int
	// set: the marker and the CONNECTION LIMIT 0 are in place, as far as
	// the last Refresh saw (a limit written back by anyone clears it, and
	// the next look applies the quarantine again).
	set bool
	// local: the marker could not be written, only the limit (a Citus
	// worker refuses COMMENT ON ROLE, "operation is not allowed on this
	// node", but takes ALTER ROLE): the quarantine lives in this
	// watchdog's memory alone, and it restores it itself.
	local bool
}

// quarantineTries: the ALTER ROLE needs room in the lock table, which the
// ended sessions free as they exit.
const (
	quarantineTries = 5
	quarantinePause = 100 * time.Millisecond
)

// end ends every session of o's role, quarantines the role and ends the
// sessions that logged in meanwhile.
func (w *LockWatchdog) end(ctx context.Context, o offender) LockHog {
	h := o.hog
	ended, err := w.endRole(ctx, o.oid)
	switch {
	case err != nil:
		h.Problem = endProblem(err)
	case len(ended) == 0 && h.Locks > 0:
		h.Problem = "pg_terminate_backend found no such session"
	default:
		h.Ended = true
	}
	q := w.startQuarantine(o.oid, h.Role, time.Now())
	// Always written again here: the role flooded, so whatever the last
	// Refresh saw, its limit may have been written back since.
	q.set = false
	if err := w.applyQuarantine(ctx, o.oid, q); err != nil {
		h.QuarantineProblem = err.Error()
	} else {
		h.Quarantine = time.Until(q.until).Round(time.Second)
	}
	if more, err := w.endRole(ctx, o.oid); err == nil {
		ended = append(ended, more...)
	}
	slices.Sort(ended)
	h.Sessions = len(slices.Compact(ended))
	return h
}

// endRole ends every session of role oid; it returns their pids (a session
// signalled before and not gone yet is signalled again).
func (w *LockWatchdog) endRole(ctx context.Context, oid uint32) ([]int, error) {
	var pids []int
	err := w.conn.QueryRow(ctx, endSQL, oid).Scan(&pids)
	return pids, err
}

// startQuarantine records a quarantine of role oid from now: twice the last
// one if that ended within the cap, else the first back-off. The last one
// may be another watchdog's, read from the role's marker.
func (w *LockWatchdog) startQuarantine(oid uint32, name string, now time.Time) *quarantine {
	q := w.quarantined[oid]
	if q == nil {
		m := w.roles[oid].mark
		q = &quarantine{name: name, until: m.ended, strikes: m.strikes}
		if m.active() {
			q.until = w.clampUntil(m.until, now)
		}
		w.quarantined[oid] = q
	}
	switch {
	case now.Before(q.until):
		return q // still running: the same back-off
	case now.Sub(q.until) > w.policy.MaxQuarantine:
		q.strikes = 0
	}
	q.strikes = min(max(q.strikes, 0)+1, maxStrikes)
	q.until, q.set = now.Add(w.policy.backoff(q.strikes)), false
	return q
}

// backoff is the quarantine of a role's strikes-th flood within the cap:
// the first back-off doubled strikes-1 times, at most MaxQuarantine. It
// doubles in a loop, not by a shift: strikes may come from a marker a
// tenant wrote, and a large shift overflows.
func (p LockPolicy) backoff(strikes int) time.Duration {
	d := p.Quarantine
	for i := 1; i < strikes && d < p.MaxQuarantine; i++ {
		d *= 2
	}
	return min(d, p.MaxQuarantine)
}

// applyQuarantine writes the quarantine into the role's marker and sets
// its CONNECTION LIMIT to 0, in one transaction, retrying while the table
// frees.
func (w *LockWatchdog) applyQuarantine(ctx context.Context, oid uint32, q *quarantine) error {
	if q.set {
		return nil
	}
	r, ok := w.roles[oid]
	if !ok {
		return fmt.Errorf("refusing the logins of role %s: role unknown", q.name)
	}
	mark := quarantineMark{until: q.until, strikes: q.strikes}
	comment := withQuarantine(r.comment, mark)
	ident := pgx.Identifier{q.name}.Sanitize()
	var err error
	for try := range quarantineTries {
		if try > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("refusing the logins of role %s: %w", q.name, ctx.Err())
			case <-time.After(quarantinePause):
			}
		}
		err = pgx.BeginFunc(ctx, w.conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident+" IS "+quoteLiteral(comment)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT %d", ident, quarantinedLimit))
			return err
		})
		if err == nil {
			q.set, q.local = true, false
			r.limit, r.comment, r.mark = quarantinedLimit, comment, mark
			w.roles[oid] = r
			return nil
		}
		// The limit alone still refuses the logins.
		if _, lerr := w.conn.Exec(ctx, fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT %d", ident, quarantinedLimit)); lerr == nil {
			q.set, q.local = true, true
			r.limit = quarantinedLimit
			w.roles[oid] = r
			return nil
		}
	}
	return fmt.Errorf("refusing the logins of role %s: %w", q.name, err)
}

// endQuarantined applies the quarantines not in place (never set, or
// their limit written back since) and ends the sessions of quarantined
// roles (logged in before the limit took hold).
func (w *LockWatchdog) endQuarantined(ctx context.Context) {
	for oid, q := range w.quarantined {
		if !time.Now().Before(q.until) {
			continue
		}
		if !q.set {
			_ = w.applyQuarantine(ctx, oid, q)
		}
		_, _ = w.endRole(ctx, oid)
	}
}

// syncQuarantines takes in the quarantines the roles' markers record (this
// watchdog's, another's of the server, a previous leader's) and marks for
// applying again every running one whose limit is not 0 or whose marker
// no longer says so. A role at 0 whose marker records no quarantine is a
// DBA's: it is never taken in, and so never restored.
func (w *LockWatchdog) syncQuarantines(now time.Time) {
	for oid, r := range w.roles {
		q := w.quarantined[oid]
		if !r.mark.active() {
			switch {
			case q == nil || !now.Before(q.until):
			case q.local:
				q.set = r.limit == quarantinedLimit
			default:
				q.set = false // the marker was rewritten during the back-off
			}
			continue
		}
		until := w.clampUntil(r.mark.until, now)
		if q == nil {
			q = &quarantine{name: r.name, until: until, strikes: r.mark.strikes}
			w.quarantined[oid] = q
		}
		if until.After(q.until) {
			q.until, q.strikes = until, max(q.strikes, r.mark.strikes)
		}
		q.set = r.limit == quarantinedLimit && r.mark.until.Equal(q.until)
	}
}

// clampUntil takes a marker's end of quarantine at most MaxQuarantine from
// now: the marker is on a server a tenant may run, and a date years ahead
// kept the watchdog's copy (and its per-look ends) that long (issue 26's
// twelfth review, HIGH 1).
func (w *LockWatchdog) clampUntil(until, now time.Time) time.Time {
	if most := now.Add(w.policy.MaxQuarantine); until.After(most) {
		return most
	}
	return until
}

// pruneQuarantines forgets the quarantines of roles the last Refresh did
// not list: such a role is gone, or past MaxRoles and not watched, and a
// listed role's state is in its marker. Without it a server listing new
// OIDs at every look grew the map by MaxRoles entries a look, for as long
// as the node was followed (issue 26's twelfth review, HIGH 1). So the map
// never holds more than MaxRoles entries.
func (w *LockWatchdog) pruneQuarantines() {
	for oid := range w.quarantined {
		if _, listed := w.roles[oid]; !listed {
			delete(w.quarantined, oid)
		}
	}
}

// restoreQuarantines gives the roles whose back-off ended, by their
// marker, their CONNECTION LIMIT again, as provisioning sizes it: the
// marker is the server's word, so the watchdog whose own back-off is the
// longest is the one that restores. A failure (a full table) is tried
// again at the next look. The strikes stay in the marker, and the
// watchdog's copy for the cap, for the next back-off to double.
func (w *LockWatchdog) restoreQuarantines(ctx context.Context, now time.Time) {
	for oid, r := range w.roles {
		if !r.mark.active() || now.Before(r.mark.until) {
			continue
		}
		if q := w.quarantined[oid]; q != nil && now.Before(q.until) {
			continue // this watchdog's longer back-off: applied again at this look
		}
		if err := w.restore(ctx, oid, r); err == nil {
			if q := w.quarantined[oid]; q != nil {
				q.set = false
			}
		}
	}
	for oid, q := range w.quarantined {
		if q.local && q.set && !now.Before(q.until) {
			if err := w.restoreLocal(ctx, oid, q); err == nil {
				q.set = false
			}
		}
	}
	for oid, q := range w.quarantined {
		if !q.set && now.Sub(q.until) > w.policy.MaxQuarantine {
			delete(w.quarantined, oid)
		}
	}
}

// restoreLocal restores a quarantine only this watchdog knows of (no
// marker): the role's limit, if it is still 0.
func (w *LockWatchdog) restoreLocal(ctx context.Context, oid uint32, q *quarantine) error {
	r, ok := w.roles[oid]
	if !ok {
		return errors.New("role unknown")
	}
	limit, err := w.shareLimit(ctx, r)
	if err != nil {
		return err
	}
	stmt := fmt.Sprintf(`DO $engram$BEGIN
	IF EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname = %s AND r.rolconnlimit = %d) THEN
		ALTER ROLE %s CONNECTION LIMIT %d;
	END IF;
END$engram$`, quoteLiteral(q.name), quarantinedLimit, pgx.Identifier{q.name}.Sanitize(), limit)
	if _, err := w.conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("restoring the connection limit of role %s: %w", q.name, err)
	}
	r.limit = limit
	w.roles[oid] = r
	return nil
}

// shareLimit is the role's part of its namespace's share, as provisioning
// sizes it.
func (w *LockWatchdog) shareLimit(ctx context.Context, r watchedRole) (int, error) {
	slots, err := connectionSlots(ctx, w.conn)
	if err != nil {
		return 0, err
	}
	siblings, err := rolesOfNamespace(ctx, w.conn, r.owner.Namespace)
	if err != nil {
		return 0, err
	}
	return w.policy.Connections.connectionLimit(slots, max(len(siblings), 1)), nil
}

// restore sets the role's CONNECTION LIMIT to its part of the share and
// records the end of the quarantine in its marker, in one statement that
// does nothing when the marker changed since the watchdog read it (another
// watchdog extended the quarantine, or restored it already).
func (w *LockWatchdog) restore(ctx context.Context, oid uint32, r watchedRole) error {
	if r.comment == "" {
		return errors.New("role unknown") // dropped, or not seen yet
	}
	limit, err := w.shareLimit(ctx, r)
	if err != nil {
		return err
	}
	mark := quarantineMark{ended: r.mark.until, strikes: r.mark.strikes}
	comment := withQuarantine(r.comment, mark)
	ident := pgx.Identifier{r.name}.Sanitize()
	stmt := fmt.Sprintf(`DO $engram$BEGIN
	IF EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname = %s
			AND pg_catalog.shobj_description(r.oid, 'pg_authid') = %s) THEN
		COMMENT ON ROLE %s IS %s;
		ALTER ROLE %s CONNECTION LIMIT %d;
	END IF;
END$engram$`, quoteLiteral(r.name), quoteLiteral(r.comment), ident, quoteLiteral(comment), ident, limit)
	if _, err := w.conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("restoring the connection limit of role %s: %w", r.name, err)
	}
	r.limit, r.comment, r.mark = limit, comment, mark
	w.roles[oid] = r
	return nil
}
