package tenant

import (
	"context"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestCitusWorkerConfigs: the coordinator's connection config, moved to
// each active worker of pg_dist_node, reaches that worker as the same
// admin; a plain database and a worker have none.
func TestCitusWorkerConfigs(t *testing.T) {
	pool, url := citusPool(t)
	ctx := testCtx(t)
	cfg := mustParseConfig(t, url)
	cfgs, err := CitusWorkerConfigs(ctx, pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, w := range testenv.CitusWorkerURLs(t, url) {
		want = append(want, testenv.HostPort(w))
	}
	var got []string
	for _, wc := range cfgs {
		conn, err := pgx.ConnectConfig(ctx, wc)
		if err != nil {
			t.Fatalf("connecting to worker %s:%d with the coordinator's credentials: %v", wc.Host, wc.Port, err)
		}
		c, err := DetectCitus(ctx, conn)
		_ = conn.Close(context.Background())
		if err != nil || c.Coordinator {
			t.Fatalf("worker %s:%d: DetectCitus = %+v, %v; want a worker", wc.Host, wc.Port, c, err)
		}
		got = append(got, net.JoinHostPort(wc.Host, strconv.Itoa(int(wc.Port))))
		if none, err := CitusWorkerConfigs(ctx, mustConnect(t, wc), wc); err != nil || len(none) != 0 {
			t.Errorf("CitusWorkerConfigs on worker %s:%d = %d, %v; want none", wc.Host, wc.Port, len(none), err)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("CitusWorkerConfigs reach %v, want the workers %v", got, want)
	}
	plain, _ := adminPool(t)
	if none, err := CitusWorkerConfigs(ctx, plain, cfg); err != nil || len(none) != 0 {
		t.Fatalf("CitusWorkerConfigs on a plain database = %d, %v; want none", len(none), err)
	}
}

func mustConnect(t *testing.T, cfg *pgx.ConnConfig) *pgx.Conn {
	t.Helper()
	conn, err := pgx.ConnectConfig(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// TestCitusReaperEndsAWorkerSnapshot: tenant A's login role logs in on the
// worker that holds its schema, directly (Citus creates the role there
// with its password), and holds a snapshot: every tenant's dead rows on
// that worker stay. The reaper, looking at the worker, ends it.
func TestCitusReaperEndsAWorkerSnapshot(t *testing.T) {
	pool, url := citusPool(t)
	resA := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_citus_wreap"), 3))
	worker := workerURL(t, url, resA.Worker)
	snap := testenv.HoldSnapshot(t, testenv.WithUser(worker, resA.LoginRole, resA.Password), "SELECT count(*) FROM pg_class")
	wpool := testenv.NewPool(t, worker, 2)
	r := &Reaper{MaxAge: time.Millisecond}
	time.Sleep(10 * time.Millisecond)
	got, err := r.Look(testCtx(t), wpool)
	if err != nil || len(got) != 1 || !got[0].Ended || got[0].PID != snap.PID || got[0].Role != resA.LoginRole {
		t.Fatalf("Look on the worker: %+v, %v; want A's session %d ended", got, err, snap.PID)
	}
	if err := snap.Alive(); err == nil {
		t.Fatal("A's session on the worker is still alive")
	}
}

// TestCitusConnectionLimitOnWorkers: the CONNECTION LIMIT of a tenant's
// login role, set through the coordinator, holds on every worker too
// (Citus propagates ALTER ROLE), where the role may log in directly.
func TestCitusConnectionLimitOnWorkers(t *testing.T) {
	pool, url := citusPool(t)
	res := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_citus_connlimit"), 3))
	if res.ConnectionLimit <= 0 {
		t.Fatalf("ConnectionLimit = %d, want a limit", res.ConnectionLimit)
	}
	for _, w := range testenv.CitusWorkerURLs(t, url) {
		var limit int
		if err := testenv.NewPool(t, w, 1).QueryRow(testCtx(t), `SELECT rolconnlimit FROM pg_roles WHERE rolname = $1`,
			res.LoginRole).Scan(&limit); err != nil || limit != res.ConnectionLimit {
			t.Errorf("on worker %s: connection limit of %s = %d (%v), want %d", testenv.HostPort(w), res.LoginRole, limit, err, res.ConnectionLimit)
		}
	}
}

// TestCitusWorkerConfigsUseAuthinfo: a password pg_dist_authinfo gives the
// admin role for one worker (how Citus itself reaches it) is the one the
// operator uses for that worker; the others keep the coordinator's. The
// entry lives in this test's own database (Citus keeps pg_dist_authinfo
// per database) and only for the operator-side config: nothing connects
// with it.
func TestCitusWorkerConfigsUseAuthinfo(t *testing.T) {
	pool, url := citusPool(t)
	ctx := testCtx(t)
	cfg := mustParseConfig(t, url)
	var nodeID int
	var worker string
	if err := pool.QueryRow(ctx, `SELECT nodeid, nodename || ':' || nodeport FROM pg_dist_node
		WHERE groupid <> 0 AND isactive ORDER BY nodeid LIMIT 1`).Scan(&nodeID, &worker); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo) VALUES ($1, current_user, $2)`,
		nodeID, `password='it\'s a secret'`); err != nil {
		t.Fatalf("adding a pg_dist_authinfo entry: %v", err)
	}
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), `DELETE FROM pg_dist_authinfo WHERE nodeid = $1`, nodeID)
	})
	cfgs, err := CitusWorkerConfigs(ctx, pool, cfg)
	if err != nil || len(cfgs) < 2 {
		t.Fatalf("CitusWorkerConfigs = %d configs, %v; want the workers", len(cfgs), err)
	}
	for _, wc := range cfgs {
		at := net.JoinHostPort(wc.Host, strconv.Itoa(int(wc.Port)))
		fromAuthinfo, want := wc.Password == "it's a secret", at == worker
		if fromAuthinfo != want || !fromAuthinfo && wc.Password != cfg.Password {
			t.Errorf("worker %s: password from pg_dist_authinfo %v, want %v (else the coordinator's)", at, fromAuthinfo, want)
		}
	}
}
