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
type quarantine struct {
	name    string
	until   time.Time
	strikes int
	// set: the CONNECTION LIMIT 0 is in place (it may fail while the table
	// is full: tried again at each look).
	set bool
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
	if err := w.applyQuarantine(ctx, q); err != nil {
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
// one if that ended within the cap, else the first back-off.
func (w *LockWatchdog) startQuarantine(oid uint32, name string, now time.Time) *quarantine {
	q := w.quarantined[oid]
	switch {
	case q == nil:
		q = &quarantine{name: name}
		w.quarantined[oid] = q
	case now.Before(q.until):
		return q // still running: the same back-off
	case now.Sub(q.until) > w.policy.MaxQuarantine:
		q.strikes = 0
	}
	q.strikes++
	d := w.policy.Quarantine << min(q.strikes-1, 20)
	q.until, q.set = now.Add(min(d, w.policy.MaxQuarantine)), false
	return q
}

// applyQuarantine sets the role's CONNECTION LIMIT to 0, retrying while
// the table frees.
func (w *LockWatchdog) applyQuarantine(ctx context.Context, q *quarantine) error {
	if q.set {
		return nil
	}
	stmt := fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT %d", pgx.Identifier{q.name}.Sanitize(), quarantinedLimit)
	var err error
	for try := range quarantineTries {
		if try > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("refusing the logins of role %s: %w", q.name, ctx.Err())
			case <-time.After(quarantinePause):
			}
		}
		if _, err = w.conn.Exec(ctx, stmt); err == nil {
			q.set = true
			return nil
		}
	}
	return fmt.Errorf("refusing the logins of role %s: %w", q.name, err)
}

// endQuarantined applies the quarantines not yet in place and ends the
// sessions of quarantined roles (logged in before the limit took hold).
func (w *LockWatchdog) endQuarantined(ctx context.Context) {
	for oid, q := range w.quarantined {
		if !time.Now().Before(q.until) {
			continue
		}
		if !q.set {
			_ = w.applyQuarantine(ctx, q)
		}
		_, _ = w.endRole(ctx, oid)
	}
}

// restoreQuarantines gives the roles whose back-off ended their
// CONNECTION LIMIT again, as provisioning sizes it. A failure (a full
// table) is tried again at the next look. The quarantine stays recorded,
// for the next back-off to double.
func (w *LockWatchdog) restoreQuarantines(ctx context.Context, now time.Time) {
	for oid, q := range w.quarantined {
		if !q.set || now.Before(q.until) {
			continue
		}
		if err := w.restore(ctx, oid, q); err == nil {
			q.set = false
		}
	}
	for oid, q := range w.quarantined {
		if !q.set && now.Sub(q.until) > w.policy.MaxQuarantine {
			delete(w.quarantined, oid)
		}
	}
}

// restore sets the role's CONNECTION LIMIT to its part of the share.
func (w *LockWatchdog) restore(ctx context.Context, oid uint32, q *quarantine) error {
	r, ok := w.roles[oid]
	if !ok {
		return errors.New("role unknown") // dropped, or not seen yet
	}
	slots, err := connectionSlots(ctx, w.conn)
	if err != nil {
		return err
	}
	siblings, err := rolesOfNamespace(ctx, w.conn, r.owner.Namespace)
	if err != nil {
		return err
	}
	limit := w.policy.Connections.connectionLimit(slots, max(len(siblings), 1))
	stmt := fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT %d", pgx.Identifier{q.name}.Sanitize(), limit)
	if _, err := w.conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("restoring the connection limit of role %s: %w", q.name, err)
	}
	return nil
}

// adoptQuarantines takes the roles at CONNECTION LIMIT 0 that this
// watchdog did not quarantine (a previous leader did, then stopped) into a
// first back-off from now, so their limit is restored.
func (w *LockWatchdog) adoptQuarantines(now time.Time) {
	for oid, r := range w.roles {
		if r.limit != quarantinedLimit {
			continue
		}
		if _, ok := w.quarantined[oid]; !ok {
			w.quarantined[oid] = &quarantine{name: r.name, until: now.Add(w.policy.Quarantine), strikes: 1, set: true}
		}
	}
}
