package tenant

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// CitusWorkerConfigs returns, when q reaches the coordinator of a Citus
// cluster, one connection config per active worker (pg_dist_node): cfg
// with the worker's host and port, the same user, password and database.
// A tenant's login role can log in on a worker directly (Citus creates
// every role there), so what bounds a tenant's sessions on the coordinator
// (the transaction reaper, the lock watchdog) must look at each worker
// too, each worker keeping its own lock table and cleanup horizon. It
// returns nil for a plain database and for a worker.
//
// The operator reaches the workers with the admin credentials it has for
// the coordinator: a Citus cluster's nodes share their roles, and the
// admin's password (or certificate) must let it log in on each worker as
// it does on the coordinator (docs/security.md, "Citus workers").
func CitusWorkerConfigs(ctx context.Context, q querier, cfg *pgx.ConnConfig) ([]*pgx.ConnConfig, error) {
	c, err := DetectCitus(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("listing the Citus workers: %w", err)
	}
	if !c.Coordinator {
		return nil, nil
	}
	out := make([]*pgx.ConnConfig, 0, len(c.Workers))
	for _, w := range c.Workers {
		host, port, err := net.SplitHostPort(w)
		if err != nil {
			return nil, fmt.Errorf("reading Citus worker %q: %w", w, err)
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("reading the port of Citus worker %q: %w", w, err)
		}
		wc := cfg.Copy()
		wc.Host, wc.Port, wc.Fallbacks = host, uint16(p), nil
		if wc.TLSConfig != nil {
			// Verify the worker's certificate against its own name.
			wc.TLSConfig = wc.TLSConfig.Clone()
			wc.TLSConfig.ServerName = host
		}
		out = append(out, wc)
	}
	return out, nil
}
