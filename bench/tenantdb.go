package main

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/memory"
)

// tenantDatabase is what every service-side part starts from: a database of
// its own (engram_bench_<purpose>_<random>) holding one tenant provisioned
// as the operator does. drop is never nil: the caller defers it before
// looking at err, so a database created before a failure is dropped too
// (or kept with --keep-db); what names it in the log.
func (h *harness) tenantDatabase(ctx context.Context, purpose, what, schema string) (db *benchDB, loginURL string, drop func(), err error) {
	db, err = createDatabase(ctx, h.serverURL, purpose)
	drop = func() {
		if db != nil {
			h.dropDatabase(what, db)
		}
	}
	if err != nil {
		return nil, "", drop, err
	}
	loginURL, err = provisionTenant(ctx, db, schema, benchDims)
	return db, loginURL, drop, err
}

// adminTenant is tenantDatabase with an admin pool of conns connections
// (session s) on its database, for seeding; done is never nil (deferred
// before err is looked at, like tenantDatabase's drop): it closes the pool,
// then drops the database.
func (h *harness) adminTenant(ctx context.Context, purpose, what, schema string, conns int32, s memory.SessionSettings) (db *benchDB, loginURL string, admin *pgxpool.Pool, done func(), err error) {
	db, loginURL, drop, err := h.tenantDatabase(ctx, purpose, what, schema)
	done = drop
	if err != nil {
		return db, loginURL, nil, done, err
	}
	admin, err = memory.NewPool(ctx, db.URL, conns, s)
	if err != nil {
		return db, loginURL, nil, done, err
	}
	return db, loginURL, admin, func() { admin.Close(); drop() }, nil
}

// servicePool is a pool of the tenant's login role sized for the largest
// concurrency measured (plus the probes that run beside it), as the raw
// side of a paired run needs.
func (h *harness) servicePool(ctx context.Context, loginURL string, s memory.SessionSettings) (*pgxpool.Pool, error) {
	return memory.NewPool(ctx, loginURL, int32(maxConcurrency(h.scale)+2), s)
}

// servedTenant is a tenant database of a run's own with a memory service
// on it (benchPolicy, synchronous commit).
type servedTenant struct {
	db       *benchDB
	loginURL string
	svc      *benchService
}

// serveTenant opens the runs that measure the service: tenantDatabase
// (purpose, what, benchSchema), then startService(name) on it. stop is
// never nil, and deferred before looking at err as tenantDatabase's drop
// is: it stops the service (if it started), then drops the database.
func (h *harness) serveTenant(ctx context.Context, purpose, what, name string) (t servedTenant, stop func(), err error) {
	var drop func()
	t.db, t.loginURL, drop, err = h.tenantDatabase(ctx, purpose, what, benchSchema)
	stop = func() {
		if t.svc != nil {
			t.svc.stop()
		}
		drop()
	}
	if err != nil {
		return t, stop, err
	}
	t.svc, err = h.startService(ctx, name, t.loginURL, benchPolicy(), false)
	return t, stop, err
}
