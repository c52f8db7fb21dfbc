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

// servicePool is a pool of the tenant's login role sized for the largest
// concurrency measured (plus the probes that run beside it), as the raw
// side of a paired run needs.
func (h *harness) servicePool(ctx context.Context, loginURL string, s memory.SessionSettings) (*pgxpool.Pool, error) {
	return memory.NewPool(ctx, loginURL, int32(maxConcurrency(h.scale)+2), s)
}
