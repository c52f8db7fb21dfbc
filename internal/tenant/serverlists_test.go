package tenant

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// fakeConn connects to a fake server of fakePG as the operator does
// (BoundMessages), with parameters typed by the client (the fake describes
// none) and rows in text form.
func fakeConn(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	cfg := mustParseConfig(t, url)
	BoundMessages(&cfg.Config)
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// heapNow is the live heap after two collections.
func heapNow() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestSequenceGrantsAreOneStatement (issue 26's ninth review, HIGH 1): a
// tenant's server (Citus "installed" is its word) listed 2.5 million
// sequences in one answer under MaxServerAnswer, and ensureSequenceGrants
// ran a GRANT and kept a Changes line for each until the pass deadline,
// with 489 MiB of heap at the peak. Now it grants in one statement
// whatever the server lists.
func TestSequenceGrantsAreOneStatement(t *testing.T) {
	const listed = 200_000
	var grants atomic.Int64
	url := fakePG(t, func(q string) fakeAnswer {
		switch {
		case strings.Contains(q, "FROM pg_class c JOIN pg_namespace n") && strings.Contains(q, "count(*)"):
			return fakeAnswer{cols: []fakeCol{{"count", 20}}, rows: func(emit func(...string) bool) { emit(strconv.Itoa(listed)) }}
		case strings.Contains(q, "FROM pg_class c JOIN pg_namespace n"):
			return fakeAnswer{cols: []fakeCol{{"relname", 25}}, rows: func(emit func(...string) bool) {
				for range listed {
					if !emit("s") {
						return
					}
				}
			}}
		case strings.HasPrefix(q, "GRANT"):
			grants.Add(1)
		}
		return fakeAnswer{}
	})
	conn := fakeConn(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := heapNow()
	res := &Result{}
	err := ensureSequenceGrants(ctx, conn, "engram_seq", roleNames{owner: "engram_seq_owner", login: "engram_seq_login"}, res)
	kept := heapNow() - before
	if err != nil {
		t.Fatalf("ensureSequenceGrants: %v", err)
	}
	if n := grants.Load(); n != 1 || len(res.Changes) != 1 {
		t.Fatalf("a server listing %d sequences: %d GRANTs run, %d Changes lines; want 1 and 1", listed, n, len(res.Changes))
	}
	if kept > 16<<20 {
		t.Fatalf("a server listing %d sequences: the pass kept %d MiB", listed, kept>>20)
	}
	runtime.KeepAlive(res)
}

// TestNamespaceRolesAreBounded (issue 26's ninth review, HIGH 1): the
// marked login roles of a namespace are the server's word on a server a
// tenant runs, and ensureConnectionLimit ran an ALTER ROLE and kept a
// Changes line for each (about 400,000 a pass from one answer). More than
// maxNamespaceRoles fails the pass with a *TooManyRowsError before any
// ALTER runs; under it, the lines about other runtimes' roles are the
// first maxChangeLines and a count.
func TestNamespaceRolesAreBounded(t *testing.T) {
	owner := Owner{UID: "u-1", Namespace: "team", Name: "rt"}
	names := roleNames{owner: "engram_rt_owner", login: "engram_rt_login"}
	serve := func(roles int, alters *atomic.Int64) string {
		return fakePG(t, func(q string) fakeAnswer {
			switch {
			case strings.Contains(q, "current_setting('max_connections')"):
				return fakeAnswer{cols: []fakeCol{{"slots", 23}}, rows: func(emit func(...string) bool) { emit("100000") }}
			case q == namespaceRolesSQL:
				return rolesAnswer(func(emit func(...string) bool) {
					marker := owner.marker()
					if !emit("1", names.login, "-1", marker) {
						return
					}
					for i := range roles - 1 {
						if !emit(strconv.Itoa(i+2), "r"+strconv.Itoa(i), "-1", marker) {
							return
						}
					}
				})
			case strings.Contains(q, "ALTER ROLE"):
				alters.Add(1)
			}
			return fakeAnswer{}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var alters atomic.Int64
	conn := fakeConn(t, serve(400_000, &alters))
	err := ensureConnectionLimit(ctx, conn, ConnectionPolicy{}, owner, names, &Result{})
	var tooMany *TooManyRowsError
	if !errors.As(err, &tooMany) || tooMany.Limit != maxNamespaceRoles {
		t.Fatalf("a server listing 400,000 roles of the namespace: %v; want a *TooManyRowsError of %d", err, maxNamespaceRoles)
	}
	if n := alters.Load(); n != 0 {
		t.Fatalf("a server listing 400,000 roles of the namespace: %d ALTER ROLE run; want none", n)
	}

	alters.Store(0)
	conn = fakeConn(t, serve(maxNamespaceRoles, &alters))
	res := &Result{}
	if err := ensureConnectionLimit(ctx, conn, ConnectionPolicy{}, owner, names, res); err != nil {
		t.Fatalf("%d roles of the namespace: %v", maxNamespaceRoles, err)
	}
	if n := alters.Load(); n != maxNamespaceRoles {
		t.Fatalf("%d roles of the namespace: %d ALTER ROLE run; want one each", maxNamespaceRoles, n)
	}
	if len(res.Changes) != maxChangeLines+2 || !strings.HasPrefix(res.Changes[len(res.Changes)-1], "and 979 more roles") {
		t.Fatalf("%d roles of the namespace: %d Changes lines, last %q; want the own role's, %d others' and a count",
			maxNamespaceRoles, len(res.Changes), res.Changes[len(res.Changes)-1], maxChangeLines)
	}
}

// TestHorizonHoldersAreBounded (issue 26's ninth review, HIGH 1, the same
// shape): the reaper keeps an entry, across looks, and may end a session
// for every tenant session a server lists. More than maxHorizonHolders is
// a *TooManyRowsError.
func TestHorizonHoldersAreBounded(t *testing.T) {
	const listed = 50_000
	url := fakePG(t, func(q string) fakeAnswer {
		if !strings.Contains(q, "FROM pg_stat_activity a") {
			return fakeAnswer{}
		}
		return fakeAnswer{cols: []fakeCol{{"pid", 23}, {"usesysid", 26}, {"rolname", 25}, {"c", 25}, {"vxid", 25}, {"age", 701}},
			rows: func(emit func(...string) bool) {
				for i := range listed {
					if !emit(strconv.Itoa(i+1), "10", "r", markerPrefix+"; uid=u; runtime=team/rt", "3/1", "99999") {
						return
					}
				}
			}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := horizonHolders(ctx, fakeConn(t, url))
	var tooMany *TooManyRowsError
	if !errors.As(err, &tooMany) || tooMany.Limit != maxHorizonHolders {
		t.Fatalf("a server listing %d sessions holding back cleanup: %v; want a *TooManyRowsError of %d", listed, err, maxHorizonHolders)
	}
}

// TestLockSessionsAreBounded (issue 26, the ninth review's HIGH 1 shape):
// the lock watchdog counted, and could end a role for, every session a
// server listed in one look. More than maxServerSessions is a
// *TooManyRowsError, and no session is ended.
func TestLockSessionsAreBounded(t *testing.T) {
	const listed = 50_000
	var ends atomic.Int64
	url := fakePG(t, func(q string) fakeAnswer {
		switch {
		case strings.Contains(q, "pg_lock_status()"):
			return fakeAnswer{cols: locksCols, rows: func(emit func(...string) bool) {
				for i := range listed {
					if !emit(strconv.Itoa(i+1), "20000", "100000") {
						return
					}
				}
			}}
		case strings.Contains(q, "pg_terminate_backend"):
			ends.Add(1)
			return fakeAnswer{cols: []fakeCol{{"pids", 1007}}, rows: func(emit func(...string) bool) { emit("{}") }}
		}
		a, _ := watchdogAnswer(q, func(emit func(...string) bool) {
			emit("20000", "engram_a_login", "5", "managed-by=engram;uid=u;runtime=team/a")
		})
		return a
	})
	cfg := mustParseConfig(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := mustOpenWatchdog(t, ctx, cfg, LockPolicy{})
	ends.Store(0) // opening prepared endSQL: the fake answers a Describe too
	_, err := d.Look(ctx)
	var tooMany *TooManyRowsError
	if !errors.As(err, &tooMany) || tooMany.Limit != maxServerSessions {
		t.Fatalf("a server listing %d sessions holding locks: %v; want a *TooManyRowsError of %d", listed, err, maxServerSessions)
	}
	if n := ends.Load(); n != 0 {
		t.Fatalf("a server listing %d sessions holding locks: %d statements ending sessions ran; want none", listed, n)
	}
}

// TestBlockingSessionsAreBounded (issue 26, the same shape): the blocker
// watch kept an entry (seen) and could end a session for every session a
// server listed as blocking the provisioning. More than maxServerSessions
// is a *TooManyRowsError.
func TestBlockingSessionsAreBounded(t *testing.T) {
	const listed = 50_000
	url := fakePG(t, func(q string) fakeAnswer {
		if !strings.Contains(q, "pg_blocking_pids") {
			return fakeAnswer{}
		}
		return fakeAnswer{cols: []fakeCol{{"pid", 23}, {"usesysid", 26}, {"rolname", 25}, {"canbe", 16}, {"admin", 16}, {"c", 25}, {"age", 701}},
			rows: func(emit func(...string) bool) {
				for i := range listed {
					if !emit(strconv.Itoa(i+1), "10", "r", "t", "f", markerPrefix+"; uid=u; runtime=team/rt", "99999") {
						return
					}
				}
			}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := blockingSessions(ctx, fakeConn(t, url), 1)
	var tooMany *TooManyRowsError
	if !errors.As(err, &tooMany) || tooMany.Limit != maxServerSessions {
		t.Fatalf("a server listing %d sessions blocking the provisioning: %v; want a *TooManyRowsError of %d", listed, err, maxServerSessions)
	}
}
