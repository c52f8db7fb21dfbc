package controller

import (
	"context"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestAdminSessionsHaveTimeouts: every session of an admin pool carries
// lock_timeout and statement_timeout, so a lock a tenant holds or a slow
// statement cannot stall a reconcile for longer.
func TestAdminSessionsHaveTimeouts(t *testing.T) {
	url := testenv.AdminURL(t)
	c := newPoolCache(Options{LockTimeout: 3 * time.Second, DatabaseTimeout: 45 * time.Second}.withDefaults())
	pool, err := c.get("test", url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lock, stmt, app string
	if err := pool.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), current_setting('application_name')`).Scan(&lock, &stmt, &app); err != nil {
		t.Fatal(err)
	}
	if lock != "3s" || stmt != "45s" || app != "engram-operator" {
		t.Fatalf("admin session: lock_timeout=%s statement_timeout=%s application_name=%s; want 3s, 45s, engram-operator", lock, stmt, app)
	}
}
