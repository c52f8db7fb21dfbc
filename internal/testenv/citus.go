package testenv

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// OnCitusEnv set to 1 makes NewDatabase create every database on the Citus
// cluster of CITUS_URL: `make test` runs the suites that matter this way
// a second time.
const OnCitusEnv = "ENGRAM_TEST_ON_CITUS"

// OnCitus reports whether the suites run on Citus (OnCitusEnv=1).
func OnCitus() bool { return os.Getenv(OnCitusEnv) == "1" }

// SkipOnCitus skips a test that checks something plain PostgreSQL does and
// a Citus coordinator does differently by design (why says what), when the
// suite runs on Citus.
func SkipOnCitus(t testing.TB, why string) {
	t.Helper()
	if OnCitus() {
		t.Skipf("not on Citus: %s", why)
	}
}

// CitusURL returns CITUS_URL, the admin URL of a database on a Citus
// coordinator with the citus and vector extensions and its workers
// registered (hack/citus.sh start prints one), or fails/skips the test.
func CitusURL(t testing.TB) string {
	t.Helper()
	return requiredEnv(t, "CITUS_URL", "Citus", "run `hack/citus.sh start` and export CITUS_URL=$(hack/citus.sh url)")
}

// NewCitusDatabase creates a fresh database on the Citus cluster of
// CITUS_URL and returns an admin URL for it on the coordinator; it is
// dropped on every node when the test ends. Citus keeps its metadata per
// database, so the database is made a cluster of its own: the database and
// the citus extension on every worker, then on the coordinator the
// extension, the coordinator's own address, the workers (those of
// CITUS_URL's database) and pgvector, which Citus creates on the workers.
// That is done once per cluster, into a template every test database is
// copied from (citus_template.go).
func NewCitusDatabase(t testing.TB) string {
	t.Helper()
	return NewCitusDatabaseAfter(t, nil)
}

// NewCitusDatabaseAfter is NewCitusDatabase for a database that existed
// before Citus: before runs on the coordinator's database with pgvector
// only, and Citus is set up after it (as when an installation adds Citus
// to a server with tenants). A nil before is NewCitusDatabase.
func NewCitusDatabaseAfter(t testing.TB, before func(dbURL string)) string {
	t.Helper()
	admin := CitusURL(t)
	url, err := newCitusDatabase(t, admin, before)
	if err != nil {
		t.Fatal(err)
	}
	return url
}

// citusSetupMu serializes the setup of Citus databases by the tests of one
// process; an advisory lock on CITUS_URL's database serializes it between
// processes (go test runs packages in parallel): citus_add_node of two new
// databases at once fails now and then, both syncing the roles to a worker
// ("tuple concurrently updated" on pg_authid).
var citusSetupMu sync.Mutex

// citusSetupLock is the advisory lock key of that serialization.
const citusSetupLock = 0x656e6772616d // "engram"

func newCitusDatabase(t testing.TB, admin string, before func(string)) (string, error) {
	citusSetupMu.Lock()
	defer citusSetupMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lock, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connecting to CITUS_URL: %w", err)
	}
	defer lock.Close(context.Background()) // closing the session releases the lock
	if _, err := lock.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(citusSetupLock)); err != nil {
		return "", fmt.Errorf("waiting for another test process's Citus setup: %w", err)
	}
	coordHost, coordPort, workers, err := citusNodes(ctx, admin)
	if err != nil {
		return "", err
	}
	name := "engram_test_" + randomHex(6)
	var nodeURLs []string
	for _, w := range workers {
		nodeURLs = append(nodeURLs, withHostPort(admin, w))
	}
	nodeURLs = append(nodeURLs, admin) // the coordinator last
	dbURL, err := withDatabase(admin, name)
	if err != nil {
		return "", err
	}
	if before == nil {
		template, err := ensureCitusTemplate(ctx, admin, nodeURLs, coordHost, coordPort, workers)
		if err != nil {
			return "", err
		}
		for _, u := range nodeURLs {
			if err := copyTemplate(ctx, postgresDB(u), template, name); err != nil {
				return "", err
			}
			t.Cleanup(func() { dropDatabase(t, postgresDB(u), name) })
		}
		return dbURL, nil
	}
	for _, u := range nodeURLs {
		if err := createOn(ctx, u, name); err != nil {
			return "", err
		}
		t.Cleanup(func() { dropDatabase(t, postgresDB(u), name) })
	}
	if err := Exec(ctx, dbURL, "CREATE EXTENSION IF NOT EXISTS vector"); err != nil {
		return "", err
	}
	before(dbURL)
	if err := setUpCitusDatabase(ctx, admin, dbURL, coordHost, coordPort, workers); err != nil {
		return "", fmt.Errorf("setting up Citus database %s: %w", name, err)
	}
	return dbURL, nil
}

// setUpCitusDatabase makes the database of dbURL, which exists on every
// node, a Citus cluster of its own: the extension on every worker, then on
// the coordinator the extension, the coordinator's own address, the workers
// and pgvector, which Citus creates on the workers.
func setUpCitusDatabase(ctx context.Context, admin, dbURL, coordHost string, coordPort int, workers []string) error {
	name := strings.TrimPrefix(mustPath(dbURL), "/")
	for _, w := range workers {
		wu, _ := withDatabase(withHostPort(admin, w), name)
		if err := Exec(ctx, wu, "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
			return fmt.Errorf("CREATE EXTENSION citus on worker %s: %w", w, err)
		}
	}
	stmts := []string{
		"CREATE EXTENSION IF NOT EXISTS citus",
		fmt.Sprintf("SELECT citus_set_coordinator_host(%s, %d)", quote(coordHost), coordPort),
	}
	for _, w := range workers {
		h, p, _ := net.SplitHostPort(w)
		stmts = append(stmts, fmt.Sprintf("SELECT citus_add_node(%s, %s)", quote(h), p))
	}
	stmts = append(stmts, "CREATE EXTENSION IF NOT EXISTS vector")
	for _, s := range stmts {
		if err := Exec(ctx, dbURL, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// postgresDB returns serverURL pointing at its server's postgres database,
// where databases are created and dropped.
func postgresDB(serverURL string) string {
	u, err := withDatabase(serverURL, "postgres")
	if err != nil {
		return serverURL
	}
	return u
}

// mustPath is the path of a URL this package built.
func mustPath(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Path
}

// citusNodes reads the coordinator's address and the workers of the
// database of admin.
func citusNodes(ctx context.Context, admin string) (string, int, []string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", 0, nil, fmt.Errorf("connecting to CITUS_URL: %w", err)
	}
	defer conn.Close(ctx)
	var host string
	var port int
	err = conn.QueryRow(ctx, `SELECT nodename, nodeport FROM pg_dist_node WHERE groupid = 0`).Scan(&host, &port)
	if err != nil {
		return "", 0, nil, fmt.Errorf("reading the coordinator of CITUS_URL from pg_dist_node (is it a Citus coordinator with citus_set_coordinator_host?): %w", err)
	}
	rows, err := conn.Query(ctx, `SELECT nodename, nodeport FROM pg_dist_node
		WHERE groupid <> 0 AND noderole = 'primary' AND isactive ORDER BY nodeid`)
	if err != nil {
		return "", 0, nil, fmt.Errorf("reading the workers of CITUS_URL: %w", err)
	}
	var workers []string
	for rows.Next() {
		var h string
		var p int
		if err := rows.Scan(&h, &p); err != nil {
			return "", 0, nil, err
		}
		workers = append(workers, net.JoinHostPort(h, strconv.Itoa(p)))
	}
	if err := rows.Err(); err != nil {
		return "", 0, nil, err
	}
	if len(workers) == 0 {
		return "", 0, nil, fmt.Errorf("CITUS_URL's coordinator has no worker nodes")
	}
	return host, port, workers, nil
}

// CitusWorkerURLs returns admin URLs of the workers of the cluster of
// dbURL (a database made by NewCitusDatabase), in the same database, with
// CITUS_URL's credentials: for tests that connect to a worker directly.
func CitusWorkerURLs(t testing.TB, dbURL string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, workers, err := citusNodes(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range workers {
		out = append(out, withHostPort(dbURL, w))
	}
	return out
}

// WithDatabase returns rawURL pointing at database name of the same server.
func WithDatabase(t testing.TB, rawURL, name string) string {
	t.Helper()
	u, err := withDatabase(rawURL, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// withHostPort returns rawURL pointing at another server, host:port.
func withHostPort(rawURL, hostPort string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	u.Host = hostPort
	return u.String()
}

func createOn(ctx context.Context, serverURL, name string) error {
	u, err := withDatabase(serverURL, "postgres")
	if err != nil {
		return err
	}
	if err := Exec(ctx, u, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("creating database %s on %s: %w", name, HostPort(serverURL), err)
	}
	return nil
}

func quote(s string) string { return "'" + s + "'" }
