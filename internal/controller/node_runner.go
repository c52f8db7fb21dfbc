package controller

import (
	"context"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/engram-dev/engram/internal/tenant"
)

// workerRefresh is how often the runner asks a database's coordinator for
// its Citus workers again (pg_dist_node): workers come and go rarely.
const workerRefresh = 30 * time.Second

// node is one PostgreSQL server the runner looks at: a database the
// operator manages, or a worker of one that is a Citus coordinator.
type node struct {
	// key is the database's key in poolCache.databases, followed by
	// " worker host:port" for a worker.
	key string
	// addr is host:port/database of the managed database (the
	// coordinator's, for a worker): a job writes events only on runtimes
	// whose own connection reaches it (eventRuntime).
	addr string
	// worker is host:port of the Citus worker; "" for the database itself.
	worker string
}

// nodeJob is what a nodeRunner does on each node.
type nodeJob interface {
	// open readies the job for n on a connection just opened (the runner
	// keeps it until a look fails).
	open(ctx context.Context, n node, conn *pgx.Conn) error
	// look runs once per round on n. An error closes the connection: a new
	// one is opened at the next round.
	look(ctx context.Context, n node, conn *pgx.Conn) error
	// forget drops what the job kept for a node no longer managed.
	forget(key string)
}

// nodeRunner runs a job every interval, for each database the operator has
// a connection to (poolCache.databases: each database once, by user) and
// for each worker of those that are Citus coordinators, on a connection
// of its own per node, opened before trouble and kept: a server whose
// connection slots or lock table a tenant filled may let no new
// connection in. It runs on the leader only, one node after the other.
type nodeRunner struct {
	name     string // the connections' application_name
	pools    *poolCache
	interval time.Duration
	job      nodeJob
	looks    *prometheus.CounterVec // by outcome: ok, error
	log      logr.Logger

	conns map[string]*nodeConn // by node key
	known map[string]bool      // nodes looked at, for the job to forget when gone
	// workers are the Citus workers found on each database (by database
	// key), with the config that reaches each, and when they were read.
	workers   map[string][]*pgx.ConnConfig
	workersAt map[string]time.Time
}

type nodeConn struct {
	conn *pgx.Conn
	cfg  *pgx.ConnConfig // what it was opened with; a worker's derive from it
}

func newNodeRunner(name string, pools *poolCache, interval time.Duration, job nodeJob, looks *prometheus.CounterVec, log logr.Logger) *nodeRunner {
	return &nodeRunner{
		name: name, pools: pools, interval: interval, job: job, looks: looks, log: log,
		conns: map[string]*nodeConn{}, known: map[string]bool{}, workers: map[string][]*pgx.ConnConfig{}, workersAt: map[string]time.Time{},
	}
}

// Start implements manager.Runnable: a round every interval until ctx ends.
func (r *nodeRunner) Start(ctx context.Context) error {
	defer r.closeAll()
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			r.round(ctx)
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one
// replica ends sessions and records events.
func (r *nodeRunner) NeedLeaderElection() bool { return true }

// round looks at each node once. Workers found at this round are looked
// at from the next one.
func (r *nodeRunner) round(ctx context.Context) {
	dbs := r.pools.databases()
	nodes, configs := r.nodes(dbs)
	for key := range r.known {
		if _, ok := nodes[key]; !ok {
			r.drop(key)
		}
	}
	for key := range r.workers {
		if _, ok := dbs[key]; !ok {
			delete(r.workers, key)
			delete(r.workersAt, key)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(nodes)) {
		if ctx.Err() != nil {
			return
		}
		r.lookAt(ctx, nodes[key], configs[key])
	}
}

// nodes lists every node of dbs with the configs that may reach it, in the
// order to try them.
func (r *nodeRunner) nodes(dbs map[string]dbTarget) (map[string]node, map[string][]*pgx.ConnConfig) {
	nodes := map[string]node{}
	configs := map[string][]*pgx.ConnConfig{}
	for key, t := range dbs {
		nodes[key] = node{key: key, addr: t.addr}
		for _, p := range t.pools {
			configs[key] = append(configs[key], p.Config().ConnConfig)
		}
		for _, wc := range r.workers[key] {
			n := node{key: key + " worker " + hostPort(wc), addr: t.addr, worker: hostPort(wc)}
			nodes[n.key] = n
			configs[n.key] = []*pgx.ConnConfig{wc}
		}
	}
	return nodes, configs
}

// lookAt runs the job on n, opening its connection if need be.
func (r *nodeRunner) lookAt(ctx context.Context, n node, configs []*pgx.ConnConfig) {
	log := r.log.WithValues("database", n.key)
	r.known[n.key] = true
	c, err := r.conn(ctx, n, configs)
	if err != nil {
		r.looks.WithLabelValues("error").Inc()
		log.V(1).Info("opening a connection failed", "error", err.Error())
		return
	}
	if err := r.job.look(ctx, n, c.conn); err != nil {
		// A broken connection is opened anew next round.
		r.looks.WithLabelValues("error").Inc()
		log.V(1).Info("looking failed", "error", err.Error())
		r.closeConn(n.key)
		return
	}
	r.looks.WithLabelValues("ok").Inc()
	if n.worker == "" {
		r.refreshWorkers(ctx, n, c)
	}
}

// conn returns the connection of n, opening it with the first of configs
// that connects (one connection Secret may hold a wrong password).
func (r *nodeRunner) conn(ctx context.Context, n node, configs []*pgx.ConnConfig) (*nodeConn, error) {
	if c := r.conns[n.key]; c != nil {
		return c, nil
	}
	var err error
	for _, cfg := range configs {
		var conn *pgx.Conn
		if conn, err = r.connect(ctx, cfg); err != nil {
			continue
		}
		if err = r.job.open(ctx, n, conn); err != nil {
			_ = conn.Close(context.Background())
			continue
		}
		c := &nodeConn{conn: conn, cfg: cfg}
		r.conns[n.key] = c
		return c, nil
	}
	return nil, err
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
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pgx.ConnectConfig(ctx, cfg)
}

// refreshWorkers reads the Citus workers of database n, at most every
// workerRefresh. A failure keeps the workers known (the look may run while
// a tenant fills the lock table, when catalog reads fail).
func (r *nodeRunner) refreshWorkers(ctx context.Context, n node, c *nodeConn) {
	if at, ok := r.workersAt[n.key]; ok && time.Since(at) < workerRefresh {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cfgs, err := tenant.CitusWorkerConfigs(ctx, c.conn, c.cfg)
	if err != nil {
		r.log.V(1).Info("listing the Citus workers failed", "database", n.key, "error", err.Error())
		return
	}
	if len(cfgs) > 0 && len(r.workers[n.key]) == 0 {
		r.log.Info("looking at the Citus workers of the database too", "database", n.key, "workers", len(cfgs))
	}
	r.workers[n.key], r.workersAt[n.key] = cfgs, time.Now()
}

// drop closes the connection of a node no longer managed and makes the job
// forget it.
func (r *nodeRunner) drop(key string) {
	r.closeConn(key)
	r.job.forget(key)
	delete(r.known, key)
}

func (r *nodeRunner) closeConn(key string) {
	if c := r.conns[key]; c != nil {
		_ = c.conn.Close(context.Background())
		delete(r.conns, key)
	}
}

func (r *nodeRunner) closeAll() {
	for key := range r.known {
		r.drop(key)
	}
}

// hostPort is host:port of cfg.
func hostPort(cfg *pgx.ConnConfig) string {
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}
