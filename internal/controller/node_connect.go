package controller

import (
	"context"
	"errors"
	"maps"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/tenant"
)

// How the node runner opens its connections: each with timeouts of its
// own and the operator's message bounds, so a node that hangs or answers
// without end costs its own look only.

// open opens the connection of n with the first of configs that connects
// (one connection Secret may hold a wrong password).
func (r *nodeRunner) open(ctx context.Context, n node, configs []*pgx.ConnConfig) (*nodeConn, error) {
	err := errors.New("no connection reaches it")
	for _, cfg := range configs {
		var conn *pgx.Conn
		if conn, err = r.connect(ctx, cfg); err != nil {
			continue
		}
		if err = r.openJob(ctx, n, conn); err != nil {
			_ = conn.Close(context.Background())
			continue
		}
		return &nodeConn{conn: conn, cfg: cfg}, nil
	}
	return nil, err
}

// openJob readies the job on a connection just opened, within two connect
// timeouts: the job's first reads (the lock watchdog's roles and table
// size) go to a server a tenant may run, which may never answer them; the
// runner's own context only ends when the node is released (issue 26,
// thirteenth review, L2).
func (r *nodeRunner) openJob(ctx context.Context, n node, conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, 2*r.connectTimeout())
	defer cancel()
	return r.job.open(ctx, n, conn)
}

// connectTimeout bounds opening a node's connection: about the interval
// (at least 1 s, at most 10 s), so a node that does not answer costs its
// own goroutine one interval, never another node's look.
func (r *nodeRunner) connectTimeout() time.Duration {
	return min(max(r.interval, time.Second), 10*time.Second)
}

// connect opens a connection of cfg's user with timeouts of its own: every
// statement of a look is short, and no lock a tenant holds may stall it.
func (r *nodeRunner) connect(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	cfg = cfg.Copy()
	cfg.RuntimeParams = maps.Clone(cfg.RuntimeParams)
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = r.name
	cfg.RuntimeParams["statement_timeout"] = "5s"
	cfg.RuntimeParams["lock_timeout"] = "1s"
	// What a look writes (a quarantine) survives a crash of the server.
	cfg.RuntimeParams["synchronous_commit"] = "on"
	cfg.ConnectTimeout = r.connectTimeout()
	tenant.BoundMessages(&cfg.Config)
	ctx, cancel := context.WithTimeout(ctx, r.connectTimeout())
	defer cancel()
	return pgx.ConnectConfig(ctx, cfg)
}

// hostPort is host:port of cfg.
func hostPort(cfg *pgx.ConnConfig) string {
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}
