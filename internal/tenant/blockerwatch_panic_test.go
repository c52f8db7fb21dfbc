package tenant

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestBlockerWatchPanicNeverExitsTheProcess (issue 26, a LOW after the
// eighth review): the blocker watch looks in a goroutine of its own, with no
// recover: a panic there (here the controller's Report, called for a
// blocker it may not end) ended the whole operator. Now it is logged, the
// watch pauses and goes on, and stop still returns what it found.
func TestBlockerWatchPanicNeverExitsTheProcess(t *testing.T) {
	url := testenv.NewDatabase(t)
	connect := func() *pgx.Conn {
		c, err := pgx.Connect(testCtx(t), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	holder, waiter := connect(), connect()
	if _, err := holder.Exec(testCtx(t), "CREATE TABLE held (x int)"); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.Begin(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(testCtx(t), "LOCK TABLE held IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := waiter.QueryRow(testCtx(t), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan error, 1)
	go func() {
		_, err := waiter.Exec(testCtx(t), "SET statement_timeout = '20s'; SELECT * FROM held")
		blocked <- err
	}()

	var mu sync.Mutex
	var logged []string
	ctx := logr.NewContext(testCtx(t), funcr.New(func(_, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, args)
	}, funcr.Options{}))
	cfg := mustParseConfig(t, url)
	var reports sync.WaitGroup
	reports.Add(1)
	w := startBlockerWatch(ctx, cfg, pid, Owner{UID: "uid-self"}, BlockerPolicy{
		MaxAge: time.Second, Interval: 100 * time.Millisecond,
		Report: func(b Blocker) {
			reports.Done()
			panic("a report that panics: " + b.Role)
		},
	})
	reports.Wait() // the superuser's session, in the way for a second: reported
	time.Sleep(500 * time.Millisecond)
	found := w.stop()
	if len(found) != 1 || found[0].Kind != BlockerNotTenant {
		t.Errorf("the watch found %+v, want the holder's session, not a tenant's", found)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) == 0 || !strings.Contains(logged[0], "the blocker watch's look panicked") || !strings.Contains(logged[0], "a report that panics") {
		t.Errorf("logged %q, want the panic", logged)
	}
	_ = tx.Rollback(context.Background())
	if err := <-blocked; err != nil {
		t.Errorf("the provisioning session's statement: %v", err)
	}
}
