package controller

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestNodeRunnerSessionIsDurableAndBounded: a session the node runner opens
// (the reaper's, the lock watchdog's, on a server or a Citus worker) has
// its timeouts and commits synchronously even when the configuration it
// was given asks otherwise: a quarantine a look wrote survives a crash.
func TestNodeRunnerSessionIsDurableAndBounded(t *testing.T) {
	cfg, err := pgx.ParseConfig(testenv.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["synchronous_commit"] = "off"
	r := newNodeRunner("engram-test-runner", nil, time.Second, nil, nil, logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := r.connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var sync, lock, stmt string
	if err := conn.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('lock_timeout'), current_setting('statement_timeout')`).
		Scan(&sync, &lock, &stmt); err != nil {
		t.Fatal(err)
	}
	if sync != "on" || lock != "1s" || stmt != "5s" {
		t.Fatalf("node runner session: synchronous_commit=%s lock_timeout=%s statement_timeout=%s; want on, 1s, 5s", sync, lock, stmt)
	}
}
