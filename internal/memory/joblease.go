package memory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
)

// DefaultJobLeaseTTL is the maintenance lease's lifetime without renewal
// when Config.JobLeaseTTL is not set.
const DefaultJobLeaseTTL = 10 * time.Minute

// JobLeaseTTLFor returns a lease TTL for runs whose sessions have sess's
// timeouts. On a one-connection pool a renewal waits for the run's current
// statement: up to lock_timeout + statement_timeout, starting up to a third
// of the TTL after the last renewal. Twice that plus a minute keeps the
// lease alive through such a wait; a killed run's lease then blocks the next
// run for at most that long.
func JobLeaseTTLFor(sess SessionSettings) time.Duration {
	sess = sess.WithDefaults()
	return 2*(sess.LockTimeout+sess.StatementTimeout) + time.Minute
}

// maintenanceLock is the row of job_locks that maintenance runs lease
// (created by migration 4).
const maintenanceLock = "maintenance"

// leaseReleaseTimeout bounds giving the lease back at the end of a run; if
// that fails the lease simply expires.
const leaseReleaseTimeout = 10 * time.Second

// WithJobLock runs fn while this run holds the tenant's maintenance lease,
// so two runs never maintain one tenant at once. It returns ErrLocked
// without calling fn when another run holds an unexpired lease.
//
// The lease is a row of job_locks in the tenant's own schema (no other
// tenant can touch it, unlike an advisory lock), taken, renewed and given
// back in short statements: no transaction or connection stays reserved for
// the run, so VACUUM keeps working, a pool of one connection cannot
// deadlock, and the lease of a killed run expires by itself after the TTL.
// A run whose lease could not be renewed in time stops: fn's context is
// canceled with ErrLeaseLost as its cause.
func (s *Store) WithJobLock(ctx context.Context, fn func(context.Context) error) error {
	holder := leaseHolder()
	if err := (*maintenance)(s).takeLease(ctx, holder); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		(*maintenance)(s).keepLease(runCtx, holder, cancel)
	}()
	err := fn(runCtx)
	lost := errors.Is(context.Cause(runCtx), ErrLeaseLost)
	cancel(nil)
	<-renewing
	(*maintenance)(s).releaseLease(ctx, holder)
	if lost && err != nil {
		return fmt.Errorf("%w: %v", ErrLeaseLost, err)
	}
	return err
}

// leaseHolder names this run in job_locks.holder: the host (the Job's pod),
// the process and a random part, so two runs never share a name.
func leaseHolder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), core.NewID()[24:])
}

// takeLease takes the maintenance lease when it is free or expired. Two
// runs racing for it are serialized by the row lock of the UPDATE: the
// second one re-reads the row and finds it held.
func (s *maintenance) takeLease(ctx context.Context, holder string) error {
	tag, err := s.core.Pool.Exec(ctx, `UPDATE `+s.sql.jobLocks+`
		SET holder = $2, expires_at = now() + make_interval(secs => $3)
		WHERE name = $1 AND (holder IS NULL OR expires_at IS NULL OR expires_at < now())`,
		maintenanceLock, holder, s.leaseTTL.Seconds())
	if err != nil {
		return core.DBErr("taking the maintenance lease", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return s.leaseHeld(ctx)
}

// leaseHeld explains why the lease could not be taken: ErrLocked with the
// current holder, or an error when the schema has no lease row at all.
func (s *maintenance) leaseHeld(ctx context.Context) error {
	var holder *string
	var until *time.Time
	err := s.core.Pool.QueryRow(ctx, `SELECT holder, expires_at FROM `+s.sql.jobLocks+` WHERE name = $1`, maintenanceLock).Scan(&holder, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("taking the maintenance lease: %s has no %q row in job_locks (schema not migrated?)", s.core.Schema, maintenanceLock)
	}
	if err != nil {
		return core.DBErr("reading the maintenance lease", err)
	}
	if holder == nil || until == nil {
		return fmt.Errorf("%w (it was released just now)", ErrLocked)
	}
	return fmt.Errorf("%w (held by %s until %s)", ErrLocked, *holder, until.UTC().Format(time.RFC3339))
}

// keepLease renews the lease every third of its TTL until ctx ends. When
// another run holds the lease (it expired and was taken over), or two
// renewals in a row failed, it cancels the run with ErrLeaseLost.
func (s *maintenance) keepLease(ctx context.Context, holder string, cancel context.CancelCauseFunc) {
	tick := time.NewTicker(s.leaseTTL / 3)
	defer tick.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		attempt := time.Now()
		tag, err := s.core.Pool.Exec(ctx, `UPDATE `+s.sql.jobLocks+` SET expires_at = now() + make_interval(secs => $3)
			WHERE name = $1 AND holder = $2`, maintenanceLock, holder, s.leaseTTL.Seconds())
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && tag.RowsAffected() == 1:
			renewed = attempt
		case err == nil:
			s.core.Log.Warn("the maintenance lease was taken over by another run; stopping", "holder", holder)
			cancel(ErrLeaseLost)
			return
		case time.Since(renewed) >= s.leaseTTL*2/3:
			// The next tick could come after the lease expired: stop while it
			// is still this run's rather than overlap with the next holder.
			s.core.Log.Warn("the maintenance lease could not be renewed in time; stopping", "holder", holder, "error", err)
			cancel(ErrLeaseLost)
			return
		default:
			s.core.Log.Warn("renewing the maintenance lease failed; retrying", "holder", holder, "error", err)
		}
	}
}

// releaseLease gives the lease back, if this run still holds it, so the
// next run need not wait for it to expire.
func (s *maintenance) releaseLease(ctx context.Context, holder string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaseReleaseTimeout)
	defer cancel()
	_, err := s.core.Pool.Exec(ctx, `UPDATE `+s.sql.jobLocks+` SET holder = NULL, expires_at = NULL
		WHERE name = $1 AND holder = $2`, maintenanceLock, holder)
	if err != nil {
		s.core.Log.Warn("releasing the maintenance lease failed; it expires by itself", "holder", holder, "error", err)
	}
}
