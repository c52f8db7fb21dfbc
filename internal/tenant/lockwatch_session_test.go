package tenant

import (
	"testing"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestLockWatchdogSessionIsDurableAndBounded: the watchdog's own session
// has its timeouts and commits synchronously even when the configuration
// it was given asks otherwise: a quarantine it wrote (CONNECTION LIMIT 0
// and the role's marker) must survive a crash of the server.
func TestLockWatchdogSessionIsDurableAndBounded(t *testing.T) {
	ctx := testCtx(t)
	cfg := mustParseConfig(t, testenv.AdminURL(t))
	cfg.RuntimeParams["synchronous_commit"] = "off"
	w, err := OpenLockWatchdog(ctx, cfg, LockPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(ctx) })
	var sync, lock, stmt string
	if err := w.conn.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('lock_timeout'), current_setting('statement_timeout')`).
		Scan(&sync, &lock, &stmt); err != nil {
		t.Fatal(err)
	}
	if sync != "on" || lock != "1s" || stmt != "5s" {
		t.Fatalf("watchdog session: synchronous_commit=%s lock_timeout=%s statement_timeout=%s; want on, 1s, 5s", sync, lock, stmt)
	}
}
