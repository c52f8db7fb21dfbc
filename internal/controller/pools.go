package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// poolCache keeps one pgx pool per admin connection (a connection Secret),
// shared by every runtime that uses it, and replaces a pool when the
// connection's URL changes (the Secret was edited). Pools hold no idle
// connection for long, so a pool nobody uses costs nothing.
type poolCache struct {
	maxConns       int32
	connectTimeout time.Duration
	// lockTimeout and statementTimeout are set on every admin session, so
	// no lock a tenant holds and no slow statement can stall a reconcile
	// beyond them.
	lockTimeout, statementTimeout time.Duration

	// idle: a pool no reconcile asked for (get, prove) for that long is
	// closed and forgotten (its runtime was deleted, its Secret changed).
	idle time.Duration

	mu     sync.Mutex
	pools  map[string]*cachedPool
	closed bool
}

type cachedPool struct {
	pool    *pgxpool.Pool
	urlHash string
	// usedAt: the last get or prove; provedAt: the last prove (zero:
	// never). Only proven pools are looked at by the node runners.
	usedAt, provedAt time.Time
}

func newPoolCache(o Options) *poolCache {
	return &poolCache{
		maxConns: o.PoolMaxConns, connectTimeout: o.ConnectTimeout,
		lockTimeout: o.LockTimeout, statementTimeout: o.DatabaseTimeout,
		idle:  3 * max(o.GrantCheckInterval, o.DatabaseCheckInterval),
		pools: map[string]*cachedPool{},
	}
}

// prove records that connection id just served a provisioning that
// succeeded (a MemoryRuntime's) or a check (a MemoryDatabase's): an admin
// that answered and proved itself. The node runners (the lock watchdog,
// the transaction reaper) look only at such connections: a connection
// Secret in a tenant's namespace may name any address, one that accepts
// and never answers included (issue 26's fourth review).
func (c *poolCache) prove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pools[id]; ok {
		p.usedAt, p.provedAt = time.Now(), time.Now()
	}
}

// get returns the pool of connection id for url, opening it (lazily: no
// connection is made here) or replacing it when url changed.
func (c *poolCache) get(id, url string) (*pgxpool.Pool, error) {
	h := naming.SHA256Hex([]byte(url))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("the operator is shutting down")
	}
	if p, ok := c.pools[id]; ok {
		if p.urlHash == h {
			p.usedAt = time.Now()
			return p.pool, nil
		}
		// Close in the background: Close waits for connections in use by
		// other reconciles, which finish with the old credentials.
		go p.pool.Close()
		delete(c.pools, id)
	}
	if !platformConnection(id) {
		// A tenant's Secret: parsed with the allow-list first, so that
		// no parameter of it makes pgx read a file of the operator's
		// (adminURL checked it too; a pool is never opened without).
		if err := tenant.CheckTenantURL(url); err != nil {
			return nil, fmt.Errorf("the admin connection: %w", err)
		}
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The parse error could quote the URL, password included; say less.
		return nil, errors.New("the admin connection is not a valid PostgreSQL URL")
	}
	cfg.MaxConns = c.maxConns
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = 2 * time.Minute
	cfg.ConnConfig.ConnectTimeout = c.connectTimeout
	if platformConnection(id) {
		tenant.BoundMessages(&cfg.ConnConfig.Config)
	} else {
		// The node runners and the blocker watch copy this config: the
		// smaller bounds follow it to every connection of the server.
		tenant.BoundTenantServer(cfg.ConnConfig)
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "engram-operator"
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = strconv.FormatInt(c.lockTimeout.Milliseconds(), 10)
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(c.statementTimeout.Milliseconds(), 10)
	// A provisioning pass the operator saw commit (a role, a grant, a
	// connection limit) survives a crash of the server whatever the
	// server's default: a lost tail is provisioned again, but its events
	// and status already said it was done.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the admin connection pool: %w", err)
	}
	c.pools[id] = &cachedPool{pool: pool, urlHash: h, usedAt: time.Now()}
	c.capNamespacePools(id)
	c.capTenantPools(id)
	return pool, nil
}

// MaxTenantPoolsPerNamespace bounds the admin pools of one namespace's
// connection Secrets the operator keeps open: each pool keeps idle
// connections for MaxConnIdleTime, and each connection to a server a
// tenant runs keeps up to about 512 KiB (tenant.BoundTenantServer). A
// namespace of 64 runtimes, each naming its own Secret, had 64 pools open
// at once (issue 26's ninth review, MEDIUM 1). Honest namespaces share a
// Secret or have a few: past the cap, a pool is opened again at its
// runtime's next pass.
const MaxTenantPoolsPerNamespace = 8

// capNamespacePools closes the least recently used pools of the namespace
// of tenant connection id beyond MaxTenantPoolsPerNamespace. One reconcile
// of a namespace runs at a time, and it asked for id just now: the pools
// closed are the namespace's idle ones. Called with c.mu held.
func (c *poolCache) capNamespacePools(id string) {
	ns, ok := secretNamespace(id)
	if !ok {
		return
	}
	var same []string
	for other := range c.pools {
		if n, ok := secretNamespace(other); ok && n == ns && other != id {
			same = append(same, other)
		}
	}
	if len(same) < MaxTenantPoolsPerNamespace {
		return
	}
	slices.SortFunc(same, func(a, b string) int { return c.pools[a].usedAt.Compare(c.pools[b].usedAt) })
	for _, old := range same[:len(same)-(MaxTenantPoolsPerNamespace-1)] {
		go c.pools[old].pool.Close() // waits for connections still in use
		delete(c.pools, old)
	}
}

// MaxTenantPools bounds the admin pools of tenants' connection Secrets
// open in all namespaces together: MaxTenantPoolsPerNamespace bounds one
// namespace, and the namespaces whose passes ran within the idle time had
// as many as they liked, each connection keeping up to 512 KiB
// (docs/security.md, "What a tenant-run server can make the operator
// keep"). Past it the least recently used idle pool is closed; its
// runtime's next pass opens it again.
const MaxTenantPools = 24

// capTenantPools closes the least recently used pools of tenants' Secrets
// beyond MaxTenantPools, except id's (asked for just now) and those with
// a connection in use (another namespace's pass may be running on it).
// Called with c.mu held.
func (c *poolCache) capTenantPools(id string) {
	var tenants []string
	for other := range c.pools {
		if _, ok := secretNamespace(other); ok {
			tenants = append(tenants, other)
		}
	}
	slices.SortFunc(tenants, func(a, b string) int { return c.pools[a].usedAt.Compare(c.pools[b].usedAt) })
	open := len(tenants)
	for _, old := range tenants {
		if open <= MaxTenantPools {
			return
		}
		if p := c.pools[old]; old != id && p.pool.Stat().AcquiredConns() == 0 {
			go p.pool.Close()
			delete(c.pools, old)
			open--
		}
	}
}

// secretNamespace is the namespace of a tenant's connection id
// ("secret/<namespace>/<name>/<key>", connectionID).
func secretNamespace(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, "secret/")
	if !ok {
		return "", false
	}
	ns, _, ok := strings.Cut(rest, "/")
	return ns, ok
}

// peek returns the pool of id if one is open (used by the finalizer when the
// connection Secret is already gone).
func (c *poolCache) peek(id string) *pgxpool.Pool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pools[id]; ok {
		return p.pool
	}
	return nil
}

// dbTarget is one database, as one user, that the transaction reaper looks
// at: the pools of the connections ids that reach it, in the order of ids.
type dbTarget struct {
	addr  string // host:port/database
	pools []*pgxpool.Pool
	ids   []string
	// platform: one of ids is the platform team's (a MemoryDatabase or a
	// clusterConnection), not a Secret of a tenant's namespace: only then
	// are the database's Citus workers followed (platformConnection).
	platform bool
}

// platformConnection reports whether connection id is the platform
// team's: a MemoryDatabase's or a clusterConnection's Secret, in the
// operator's namespace. A tenant's connectionSecretRef may name a server
// the tenant runs, where its admin is a superuser that can make the server
// say anything about itself, a list of Citus workers included (issue 26's
// fifth review, MEDIUM 3a).
func platformConnection(id string) bool {
	return strings.HasPrefix(id, "database/") || strings.HasPrefix(id, "cluster/")
}

// databases returns the open proven pools by database and user, keyed by
// "user@host:port/database": several connection Secrets may name the same
// database, which the transaction reaper then looks at once per round,
// through the first pool that answers (one Secret may hold a wrong
// password). Users are kept apart: they may have different privileges.
func (c *poolCache) databases() map[string]dbTarget {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweep(time.Now())
	out := map[string]dbTarget{}
	for _, id := range slices.Sorted(maps.Keys(c.pools)) {
		if c.pools[id].provedAt.IsZero() {
			continue
		}
		p := c.pools[id].pool
		addr := poolAddress(p)
		key := p.Config().ConnConfig.User + "@" + addr
		t := out[key]
		t.addr = addr
		t.pools = append(t.pools, p)
		t.ids = append(t.ids, id)
		t.platform = t.platform || platformConnection(id)
		out[key] = t
	}
	return out
}

// sweep closes the pools nobody asked for within c.idle. Called with c.mu
// held.
func (c *poolCache) sweep(now time.Time) {
	if c.idle <= 0 {
		return
	}
	for id, p := range c.pools {
		if now.Sub(p.usedAt) > c.idle {
			go p.pool.Close() // waits for connections still in use
			delete(c.pools, id)
		}
	}
}

// address returns "host:port/database" of the open pool of connection id,
// "" when none is open.
func (c *poolCache) address(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pools[id]; ok {
		return poolAddress(p.pool)
	}
	return ""
}

func poolAddress(p *pgxpool.Pool) string {
	cc := p.Config().ConnConfig
	return fmt.Sprintf("%s:%d/%s", cc.Host, cc.Port, cc.Database)
}

// Start implements manager.Runnable: it closes every pool when the manager stops.
func (c *poolCache) Start(ctx context.Context) error {
	<-ctx.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for id, p := range c.pools {
		p.pool.Close()
		delete(c.pools, id)
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: pools are
// closed on every replica, leader or not.
func (c *poolCache) NeedLeaderElection() bool { return false }
