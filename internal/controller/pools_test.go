package controller

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestAdminSessionsHaveTimeouts: every session of an admin pool carries
// lock_timeout and statement_timeout, so a lock a tenant holds or a slow
// statement cannot stall a reconcile for longer, and commits
// synchronously even when the server's default (here the URL's) is off:
// a crash must not take back a provisioning pass the operator reported.
func TestAdminSessionsHaveTimeouts(t *testing.T) {
	u, err := url.Parse(testenv.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("synchronous_commit", "off")
	u.RawQuery = q.Encode()
	c := newPoolCache(Options{LockTimeout: 3 * time.Second, DatabaseTimeout: 45 * time.Second}.withDefaults())
	// A platform connection: a tenant's URL may not set synchronous_commit.
	pool, err := c.get("database/test", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lock, stmt, app, sync string
	if err := pool.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), current_setting('application_name'),
		current_setting('synchronous_commit')`).Scan(&lock, &stmt, &app, &sync); err != nil {
		t.Fatal(err)
	}
	if lock != "3s" || stmt != "45s" || app != "engram-operator" || sync != "on" {
		t.Fatalf("admin session: lock_timeout=%s statement_timeout=%s application_name=%s synchronous_commit=%s; want 3s, 45s, engram-operator, on",
			lock, stmt, app, sync)
	}
}
