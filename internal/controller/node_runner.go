package controller

import (
	"context"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
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
	// followWorkers: the database is the platform team's (dbTarget.platform),
	// so the Citus workers its coordinator lists are looked at too.
	followWorkers bool
}

// tenantRun reports whether n is a database on a server a tenant runs
// (reached only through tenants' connection Secrets); the Citus workers
// followed are the platform's.
func (n node) tenantRun() bool { return !n.followWorkers && n.worker == "" }

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

// maxTenantLooksAtOnce is how many looks at tenant-run nodes a runner runs
// at once, whatever the number of nodes. What one look reads from a server
// a tenant runs is bounded (tenant.MaxServerAnswer), but each look in
// flight holds its own: 16 reaper looks at once on hostile servers went
// past 900 MiB of heap (issue 26's tenth review, HIGH 1). The platform's
// nodes are not counted: their answers are the platform's, and a tenant's
// node that is slow must not delay them.
const maxTenantLooksAtOnce = 4

// maxKeyBackoff caps the pause of a node whose connection or look keeps
// failing.
const maxKeyBackoff = 30 * time.Second

// nodeRunner runs a job every interval on each database the operator has a
// proven connection to (poolCache.databases: each database once, by user)
// and on each worker of those that are Citus coordinators, on a
// connection of its own per node, opened before trouble and kept: a server
// whose connection slots or lock table a tenant filled may let no new
// connection in. It runs on the leader only.
//
// Each node has a goroutine and a ticker of its own (runKey): a node that
// is slow or does not answer never delays another (issue 26's fourth
// review: a connection Secret naming an address that accepts and never
// answers stalled the 1 s watchdog of every database for 10 s a round).
// A connection is opened with a timeout of about the interval, and a node
// whose connection or look fails is paused, doubling up to maxKeyBackoff.
type nodeRunner struct {
	name     string // the connections' application_name
	pools    *poolCache
	interval time.Duration
	job      nodeJob
	looks    *prometheus.CounterVec // by outcome: ok, error
	log      logr.Logger

	mu    sync.Mutex
	nodes map[string]*nodeState // by node key
	// workers are the Citus workers found on each database (by database
	// key), with the config that reaches each, and when they were read.
	workers   map[string][]*pgx.ConnConfig
	workersAt map[string]time.Time
	// overCap are the tenant-run databases not followed for a cap
	// (followedDatabases), already logged.
	overCap map[string]bool
	// tenantSlots holds one token per look at a tenant-run node in flight
	// (maxTenantLooksAtOnce).
	tenantSlots chan struct{}
}

// nodeState is one node's connection and pause. Its mutex serializes the
// node's looks; configs is guarded by the runner's.
type nodeState struct {
	n       node
	configs []*pgx.ConnConfig

	mu       sync.Mutex
	conn     *nodeConn
	failures int
	next     time.Time // no look before (a pause after failures)
	stop     context.CancelFunc
}

type nodeConn struct {
	conn *pgx.Conn
	cfg  *pgx.ConnConfig // what it was opened with; a worker's derive from it
}

func newNodeRunner(name string, pools *poolCache, interval time.Duration, job nodeJob, looks *prometheus.CounterVec, log logr.Logger) *nodeRunner {
	return &nodeRunner{
		name: name, pools: pools, interval: interval, job: job, looks: looks, log: log,
		nodes: map[string]*nodeState{}, workers: map[string][]*pgx.ConnConfig{}, workersAt: map[string]time.Time{},
		overCap: map[string]bool{}, tenantSlots: make(chan struct{}, maxTenantLooksAtOnce),
	}
}

// Start implements manager.Runnable: every interval it learns the nodes,
// starts a goroutine for each new one and stops those of nodes gone.
func (r *nodeRunner) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		for _, st := range r.sync() {
			kctx, stop := context.WithCancel(ctx)
			st.stop = stop
			wg.Go(func() { r.runKey(kctx, st) })
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one
// replica ends sessions and records events.
func (r *nodeRunner) NeedLeaderElection() bool { return true }

// runKey looks at one node every interval until ctx ends, then closes its
// connection and makes the job forget it.
func (r *nodeRunner) runKey(ctx context.Context, st *nodeState) {
	defer r.release(st)
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for {
		r.lookKey(ctx, st)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// round looks at every node once, each in a goroutine of its own, and
// returns when all are done (tests; Start runs each node on its own
// ticker). Workers found at this round are looked at from the next one.
func (r *nodeRunner) round(ctx context.Context) {
	r.sync()
	r.mu.Lock()
	nodes := slices.Collect(maps.Values(r.nodes))
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, st := range nodes {
		wg.Go(func() { r.lookKey(ctx, st) })
	}
	wg.Wait()
}

// sync learns the nodes: it records new ones (returned, for Start to run)
// with the configs that may reach them, updates the configs of known ones,
// and stops (or, without a goroutine, releases) those no longer managed or
// now over a cap on tenant-run databases (followedDatabases).
func (r *nodeRunner) sync() []*nodeState {
	dbs := r.pools.databases()
	r.mu.Lock()
	defer r.mu.Unlock()
	follow, over := followedDatabases(dbs, MaxTenantNodesPerNamespace, MaxTenantNodes)
	r.warnOverCap(over)
	maps.DeleteFunc(dbs, func(key string, _ dbTarget) bool { return !follow[key] })
	for key := range r.workers {
		if _, ok := dbs[key]; !ok {
			delete(r.workers, key)
			delete(r.workersAt, key)
		}
	}
	nodes, configs := r.nodesOf(dbs)
	var added []*nodeState
	for key, n := range nodes {
		st := r.nodes[key]
		if st == nil {
			st = &nodeState{n: n}
			r.nodes[key] = st
			added = append(added, st)
		}
		st.configs = configs[key]
	}
	for key, st := range r.nodes {
		if _, ok := nodes[key]; ok {
			continue
		}
		delete(r.nodes, key)
		if st.stop != nil {
			st.stop() // its goroutine releases it
		} else {
			go r.release(st)
		}
	}
	return added
}

// nodesOf lists every node of dbs with the configs that may reach it, in
// the order to try them. Called with r.mu held.
func (r *nodeRunner) nodesOf(dbs map[string]dbTarget) (map[string]node, map[string][]*pgx.ConnConfig) {
	nodes := map[string]node{}
	configs := map[string][]*pgx.ConnConfig{}
	for key, t := range dbs {
		nodes[key] = node{key: key, addr: t.addr, followWorkers: t.platform}
		for _, p := range t.pools {
			configs[key] = append(configs[key], p.Config().ConnConfig)
		}
		if !t.platform {
			continue // a tenant's own server: its word about workers proves nothing
		}
		for _, wc := range r.workers[key] {
			n := node{key: key + " worker " + hostPort(wc), addr: t.addr, worker: hostPort(wc)}
			nodes[n.key] = n
			configs[n.key] = []*pgx.ConnConfig{wc}
		}
	}
	return nodes, configs
}

// lookKey runs the job on the node unless it is paused after failures; a
// failure pauses it for twice the interval, doubling up to maxKeyBackoff.
func (r *nodeRunner) lookKey(ctx context.Context, st *nodeState) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if time.Now().Before(st.next) || ctx.Err() != nil {
		return
	}
	if r.lookSafely(ctx, st) {
		st.failures, st.next = 0, time.Time{}
		return
	}
	st.failures++
	st.next = time.Now().Add(min(r.interval<<min(st.failures, 16), maxKeyBackoff))
}

// lookSafely is lookAt, with a panic of the job taken as a failed look:
// logged, the node's connection closed and the node paused like after any
// failure. A job reads what the server says, and a server a tenant runs
// says anything: a forged quarantine marker made the lock watchdog panic,
// and with nothing recovering in this goroutine the operator exited, every
// tenant's watchdog and reaper with it (issue 26's sixth review,
// MEDIUM 1). Called with st.mu held.
func (r *nodeRunner) lookSafely(ctx context.Context, st *nodeState) (ok bool) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		ok = false
		r.looks.WithLabelValues("error").Inc()
		r.log.Error(fmt.Errorf("panic: %v", p), "a look panicked; the node is paused like after a failure",
			"database", st.n.key, "stack", string(debug.Stack()))
		if st.conn != nil {
			_ = st.conn.conn.Close(context.Background())
			st.conn = nil
		}
	}()
	return r.lookAt(ctx, st)
}

// lookAt runs the job on the node, opening its connection if need be; it
// reports whether the look succeeded. Called with st.mu held.
func (r *nodeRunner) lookAt(ctx context.Context, st *nodeState) bool {
	n := st.n
	log := r.log.WithValues("database", n.key)
	if st.conn == nil {
		r.mu.Lock()
		configs := st.configs
		r.mu.Unlock()
		c, err := r.open(ctx, n, configs)
		if err != nil {
			r.looks.WithLabelValues("error").Inc()
			log.V(1).Info("opening a connection failed", "error", err.Error())
			return false
		}
		st.conn = c
	}
	if n.tenantRun() {
		release, ok := r.tenantSlot(ctx)
		if !ok {
			log.V(1).Info("no look at a tenant-run node ended within the interval; this node is looked at next round", "atOnce", maxTenantLooksAtOnce)
			return true // not the node's failure: no pause
		}
		defer release()
	}
	if err := r.job.look(ctx, n, st.conn.conn); err != nil {
		// A broken connection is opened anew at the next look.
		r.looks.WithLabelValues("error").Inc()
		log.V(1).Info("looking failed", "error", err.Error())
		_ = st.conn.conn.Close(context.Background())
		st.conn = nil
		return false
	}
	r.looks.WithLabelValues("ok").Inc()
	if n.worker == "" && n.followWorkers {
		r.refreshWorkers(ctx, n, st.conn)
	}
	return true
}

// tenantSlot waits, at most one interval, for a look at a tenant-run node
// to be allowed (maxTenantLooksAtOnce); release gives the slot back. A
// slot is held for the look only: opening a connection reads little
// (tenant.BoundMessages), and a node that hangs holds a slot at most for
// its look's timeouts.
func (r *nodeRunner) tenantSlot(ctx context.Context) (release func(), ok bool) {
	wait := time.NewTimer(r.interval)
	defer wait.Stop()
	select {
	case r.tenantSlots <- struct{}{}:
		return func() { <-r.tenantSlots }, true
	case <-ctx.Done():
		return nil, false
	case <-wait.C:
		return nil, false
	}
}

// refreshWorkers reads the Citus workers of database n, at most every
// workerRefresh. A failure keeps the workers known (the look may run while
// a tenant fills the lock table, when catalog reads fail).
func (r *nodeRunner) refreshWorkers(ctx context.Context, n node, c *nodeConn) {
	r.mu.Lock()
	at, ok := r.workersAt[n.key]
	known := len(r.workers[n.key])
	r.mu.Unlock()
	if ok && time.Since(at) < workerRefresh {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cfgs, err := tenant.CitusWorkerConfigs(ctx, c.conn, c.cfg)
	if err != nil {
		r.log.V(1).Info("listing the Citus workers failed", "database", n.key, "error", err.Error())
		return
	}
	if len(cfgs) > 0 && known == 0 {
		r.log.Info("looking at the Citus workers of the database too", "database", n.key, "workers", len(cfgs))
	}
	r.mu.Lock()
	r.workers[n.key], r.workersAt[n.key] = cfgs, time.Now()
	r.mu.Unlock()
}

// release closes the connection of a node no longer looked at and makes
// the job forget it.
func (r *nodeRunner) release(st *nodeState) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.conn != nil {
		_ = st.conn.conn.Close(context.Background())
		st.conn = nil
	}
	r.job.forget(st.n.key)
}

// closeAll releases every node (tests; Start's goroutines release their
// own).
func (r *nodeRunner) closeAll() {
	r.mu.Lock()
	nodes := r.nodes
	r.nodes = map[string]*nodeState{}
	r.mu.Unlock()
	for _, st := range nodes {
		r.release(st)
	}
}
