package memory

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// promptly is how long tenant B's work may take while tenant A holds every
// lock it can: well below the lock_timeout (5 s), so B did not merely time
// out, it was never blocked.
const promptly = 2 * time.Second

// oldLockKeys are the advisory lock keys the engine used before its locks
// moved into the tenant's schema: a hash anyone can compute from the schema
// and the owner id, in the keyspace every role of the database shares.
func oldLockKeys(schema string, owners ...string) [][2]int32 {
	keys := [][2]int32{{core.Hash32("engram:job"), core.Hash32(schema)}}
	for _, o := range owners {
		keys = append(keys, [2]int32{core.Hash32("engram:owner:" + schema), core.Hash32(o)})
	}
	return keys
}

// TestTenantCannotBlockAnotherTenant: tenant A's login role, in the same
// database as tenant B, holds a snapshot open, takes every advisory lock it
// could compute for B's work and tries to lock B's lock rows and tables
// (refused: no privilege on B's schema). B is provisioned meanwhile (its
// migrations, replayed as an upgrade does, build indexes concurrently,
// which wait for A's snapshot until the operator's watcher ends A's
// session), and B's adds (known and new
// owner), erase and a full maintenance run finish promptly while A holds a
// new snapshot and its advisory locks. Nothing A committed is lost.
//
// The advisory half cannot pass by luck: A may take any advisory key, every
// other non-superuser role of the database none (testenv.ArmAdvisoryTrap).
// Had B's service or jobs taken an advisory lock, whatever its key, B's
// work would fail with "permission denied" instead of finishing.
func TestTenantCannotBlockAnotherTenant(t *testing.T) {
	a := newFixture(t)
	a.add(AddRequest{Owner: "a-user", Content: "a memory tenant A committed"})
	roleA := currentUser(t, a.loginURL)
	testenv.ArmAdvisoryTrap(t, a.adminURL, roleA)

	snap := testenv.HoldSnapshot(t, a.loginURL, "SELECT count(*) FROM memories")
	var mu sync.Mutex
	var reports []tenant.Blocker
	b := newFixture(t, inDatabaseOf(a), withSpec(func(s *tenant.Spec) {
		// Replayed as an upgrade would be: a new tenant's one-step install
		// builds no index concurrently and waits for no snapshot.
		s.Replay = true
		s.IndexTimeout = time.Minute // without the watcher: fails here
		s.Blockers = tenant.BlockerPolicy{MaxAge: promptly, Interval: 100 * time.Millisecond, Report: func(b tenant.Blocker) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, b)
		}}
	}))
	mu.Lock()
	ended := slices.ContainsFunc(reports, func(b tenant.Blocker) bool { return b.PID == snap.PID && b.Ended && b.Role == roleA })
	mu.Unlock()
	if !ended {
		t.Fatalf("B was provisioned but A's snapshot session %d was not reported ended: %+v", snap.PID, reports)
	}
	if err := testenv.AdvisoryTrapped(b.loginURL); err != nil {
		t.Fatalf("tenant B's login role: %v", err)
	}
	b.add(AddRequest{Owner: "victim", Content: "an existing memory of the victim"})
	testenv.HoldSnapshot(t, a.loginURL, "SELECT count(*) FROM memories") // A tries again

	attacker, err := pgx.Connect(ctx(t), a.loginURL)
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close(context.Background())
	for _, k := range oldLockKeys(b.store.core.Schema, "victim", "newcomer") {
		if _, err := attacker.Exec(ctx(t), `SELECT pg_advisory_lock($1, $2)`, k[0], k[1]); err != nil {
			t.Fatalf("tenant A taking advisory lock %v: %v", k, err)
		}
	}
	tx, err := attacker.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	for _, stmt := range []string{
		`SELECT FROM ` + b.store.sql.ownerLocks + ` FOR UPDATE`,
		`SELECT FROM ` + b.store.sql.jobLocks + ` FOR UPDATE`,
		`UPDATE ` + b.store.sql.jobLocks + ` SET holder = 'tenant-a', expires_at = 'infinity'`,
		`INSERT INTO ` + b.store.sql.ownerLocks + ` VALUES ('newcomer')`,
		`LOCK TABLE ` + b.store.sql.ownerLocks + `, ` + b.store.sql.jobLocks + `, ` + b.store.sql.memories,
	} {
		if _, err := tx.Exec(ctx(t), `SAVEPOINT s`); err != nil {
			t.Fatal(err)
		}
		_, err := tx.Exec(ctx(t), stmt)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("tenant A ran %q: %v, want permission denied (42501)", stmt, err)
		}
		if _, err := tx.Exec(ctx(t), `ROLLBACK TO SAVEPOINT s`); err != nil {
			t.Fatal(err)
		}
	}

	timed := func(what string, fn func(context.Context) error) {
		t.Helper()
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		err := fn(c)
		if took := time.Since(start); err != nil || took > promptly {
			t.Errorf("tenant B's %s while tenant A holds its locks: %v after %s, want success within %s", what, err, took.Round(time.Millisecond), promptly)
		}
	}
	for _, owner := range []string{"victim", "newcomer"} {
		timed("add for "+owner, func(c context.Context) error {
			_, err := b.store.Add(c, AddRequest{Owner: owner, Content: "a fresh memory of " + owner})
			return err
		})
	}
	timed("maintenance run", func(c context.Context) error {
		return b.store.WithJobLock(c, func(c context.Context) error {
			for _, op := range Operations {
				if _, err := b.store.RunJob(c, op, JobOptions{}); err != nil {
					return err
				}
			}
			return nil
		})
	})
	timed("erase", func(c context.Context) error {
		_, err := b.store.EraseOwner(c, "newcomer")
		return err
	})
	if n := a.count(`SELECT count(*) FROM %s WHERE owner_id = 'a-user'`); n != 1 {
		t.Errorf("tenant A has %d of the 1 memory it committed", n)
	}
}

// currentUser is the role url logs in as.
func currentUser(t *testing.T, url string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var who string
	if err := conn.QueryRow(ctx(t), `SELECT current_user`).Scan(&who); err != nil {
		t.Fatal(err)
	}
	return who
}

// TestSessionTimeouts: every session of the engine's pool carries
// lock_timeout, statement_timeout and synchronous_commit=on (unless the
// runtime opted out), defaults included and whatever the URL asks for.
func TestSessionTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name                string
		sess                SessionSettings
		urlOptions          string
		lock, statemt, sync string
	}{
		{"defaults", SessionSettings{}, "", "5s", "30s", "on"},
		{"configured", SessionSettings{LockTimeout: 250 * time.Millisecond, StatementTimeout: 5 * time.Minute}, "", "250ms", "5min", "on"},
		{"the URL cannot turn them off", SessionSettings{}, "options=-c%20lock_timeout%3D0%20-c%20statement_timeout%3D0%20-c%20synchronous_commit%3Doff", "5s", "30s", "on"},
		{"asynchronous commit asked for", SessionSettings{AsynchronousCommit: true}, "", "5s", "30s", "off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			url := f.loginURL
			if tc.urlOptions != "" {
				url += "&" + tc.urlOptions
			}
			pool, err := NewPool(ctx(t), url, 2, tc.sess)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			// The test server may run with synchronous_commit=off
			// (ENGRAM_PG_DURABILITY=fast): the session must say on anyway.
			var lock, statement, sync string
			if err := pool.QueryRow(ctx(t), `SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), current_setting('synchronous_commit')`).Scan(&lock, &statement, &sync); err != nil {
				t.Fatal(err)
			}
			if lock != tc.lock || statement != tc.statemt || sync != tc.sync {
				t.Fatalf("lock_timeout %s, statement_timeout %s, synchronous_commit %s; want %s, %s and %s", lock, statement, sync, tc.lock, tc.statemt, tc.sync)
			}
		})
	}
}

// TestLockTimeoutIsRetryable: a write that waits for an owner lock held
// longer than lock_timeout (here a stuck transaction of the tenant itself)
// fails after about lock_timeout with ErrBusy, which matches ErrUnavailable
// (the service answers 503 with Retry-After), and the same holds for a
// statement cut by statement_timeout.
func TestLockTimeoutIsRetryable(t *testing.T) {
	f := newFixture(t, withSession(SessionSettings{LockTimeout: 300 * time.Millisecond, StatementTimeout: time.Second}))
	f.add(AddRequest{Owner: "stuck", Content: "a memory of the stuck owner"})
	tx, err := f.admin.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx(t), `SELECT FROM `+f.store.sql.ownerLocks+` WHERE owner_id = 'stuck' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = f.store.Add(ctx(t), AddRequest{Owner: "stuck", Content: "a write behind the stuck transaction"})
	took := time.Since(start)
	if !errors.Is(err, ErrBusy) || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "locking owner") {
		t.Fatalf("add behind a held owner lock: %v, want ErrBusy (and ErrUnavailable)", err)
	}
	if took > promptly {
		t.Fatalf("add failed after %s, want about the lock_timeout of 300ms", took)
	}
	if _, err := f.store.Add(ctx(t), AddRequest{Owner: "free", Content: "another owner is not blocked"}); err != nil {
		t.Fatalf("another owner's add: %v", err)
	}

	_, err = f.store.core.Pool.Exec(ctx(t), `SELECT pg_sleep(5)`)
	if err = core.DBErr("sleeping", err); !errors.Is(err, ErrBusy) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("statement past statement_timeout: %v, want ErrBusy", err)
	}
}
