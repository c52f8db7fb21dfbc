package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// citusDB is a database of its own on the Citus cluster of CITUS_URL (a
// coordinator whose database has its workers registered: hack/citus.sh
// start prints one). Citus keeps its metadata per database, so the new
// database is made a cluster of its own, as testenv.NewCitusDatabase does
// for the tests: the database and the citus extension on every worker,
// then on the coordinator the extension, the coordinator's own address,
// the workers and pgvector.
type citusDB struct {
	name            string
	URL             string   // admin URL of the new database on the coordinator
	nodes           []string // admin URLs of every node's postgres database, coordinator first
	coordinatorPort int
	workers         []string // host:port
	version         string   // of the citus extension
	roles           []string
}

// citusSetupLock is the advisory lock (on CITUS_URL's database) that the
// tests take around the same setup (internal/testenv): citus_add_node of two
// new databases at once fails now and then, both syncing roles to a worker.
const citusSetupLock = 0x656e6772616d

// createCitusDatabase creates engram_bench_<purpose>_<random> on every
// node of the cluster of adminURL. On error it returns what it created, for drop.
func createCitusDatabase(ctx context.Context, adminURL, purpose string) (*citusDB, error) {
	lock, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to CITUS_URL: %w", err)
	}
	defer lock.Close(context.Background()) // closing the session releases the lock
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(citusSetupLock)); err != nil {
		return nil, fmt.Errorf("waiting for another Citus setup on CITUS_URL: %w", err)
	}
	coord, workers, err := citusNodes(ctx, lock)
	if err != nil {
		return nil, err
	}
	db := &citusDB{name: "engram_bench_" + purpose + "_" + randomSuffix(), workers: workers}
	if _, p, err := net.SplitHostPort(coord); err == nil {
		db.coordinatorPort, _ = strconv.Atoi(p)
	}
	db.nodes = append(db.nodes, withNode(adminURL, "", "postgres"))
	for _, w := range workers {
		db.nodes = append(db.nodes, withNode(adminURL, w, "postgres"))
	}
	for _, n := range db.nodes {
		if err := testenv.Exec(ctx, n, "CREATE DATABASE "+pgx.Identifier{db.name}.Sanitize()); err != nil {
			return db, fmt.Errorf("creating database %s on %s: %w", db.name, testenv.HostPort(n), err)
		}
	}
	for _, w := range workers {
		if err := testenv.Exec(ctx, withNode(adminURL, w, db.name), "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
			return db, fmt.Errorf("CREATE EXTENSION citus on worker %s: %w", w, err)
		}
	}
	db.URL = withNode(adminURL, "", db.name)
	h, p, _ := net.SplitHostPort(coord)
	stmts := []string{"CREATE EXTENSION IF NOT EXISTS citus", fmt.Sprintf("SELECT citus_set_coordinator_host(%s, %s)", quoteLiteral(h), p)}
	for _, w := range workers {
		wh, wp, _ := net.SplitHostPort(w)
		stmts = append(stmts, fmt.Sprintf("SELECT citus_add_node(%s, %s)", quoteLiteral(wh), wp))
	}
	stmts = append(stmts, "CREATE EXTENSION IF NOT EXISTS vector")
	for _, s := range stmts {
		if err := testenv.Exec(ctx, db.URL, s); err != nil {
			return db, fmt.Errorf("setting up Citus database %s (%s): %w", db.name, s, err)
		}
	}
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		return db, err
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT extversion FROM pg_extension WHERE extname = 'citus'`).Scan(&db.version); err != nil {
		return db, fmt.Errorf("reading the citus version: %w", err)
	}
	return db, nil
}

// citusNodes reads the coordinator's address and the active primary workers.
func citusNodes(ctx context.Context, conn *pgx.Conn) (string, []string, error) {
	var host string
	var port int
	if err := conn.QueryRow(ctx, `SELECT nodename, nodeport FROM pg_dist_node WHERE groupid = 0`).Scan(&host, &port); err != nil {
		return "", nil, fmt.Errorf("reading the coordinator of CITUS_URL from pg_dist_node (a Citus coordinator with citus_set_coordinator_host?): %w", err)
	}
	rows, err := conn.Query(ctx, `SELECT nodename, nodeport FROM pg_dist_node
		WHERE groupid <> 0 AND noderole = 'primary' AND isactive ORDER BY nodeid`)
	if err != nil {
		return "", nil, fmt.Errorf("reading the workers of CITUS_URL: %w", err)
	}
	var workers []string
	for rows.Next() {
		var h string
		var p int
		if err := rows.Scan(&h, &p); err != nil {
			return "", nil, err
		}
		workers = append(workers, net.JoinHostPort(h, strconv.Itoa(p)))
	}
	if err := rows.Err(); err != nil {
		return "", nil, err
	}
	if len(workers) == 0 {
		return "", nil, errors.New("CITUS_URL's coordinator has no worker nodes")
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), workers, nil
}

// drop removes the database from every node, then the tenant roles (roles
// are per node, and Citus copied them to the workers). A fresh context, so
// it also runs after an interrupt.
func (d *citusDB) drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for _, n := range d.nodes {
		if err := testenv.Exec(ctx, n, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.name}.Sanitize()+" WITH (FORCE)"); err != nil {
			errs = append(errs, fmt.Errorf("dropping database %s on %s: %w", d.name, testenv.HostPort(n), err))
		}
		for _, r := range d.roles {
			if err := testenv.Exec(ctx, n, "DROP ROLE IF EXISTS "+pgx.Identifier{r}.Sanitize()); err != nil {
				errs = append(errs, fmt.Errorf("dropping role %s on %s: %w", r, testenv.HostPort(n), err))
			}
		}
	}
	return errors.Join(errs...)
}

// withNode returns adminURL pointing at node host:port ("" keeps its own)
// and database name.
func withNode(adminURL, hostPort, name string) string {
	u, err := url.Parse(adminURL)
	if err != nil {
		return adminURL
	}
	if hostPort != "" {
		u.Host = hostPort
	}
	u.Path = "/" + name
	return u.String()
}

func quoteLiteral(s string) string { return "'" + s + "'" }
