package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestInstanceStartsAfterKillWithBusyBackend: after a kill -9 of the
// postmaster, a backend busy with a statement (no wait in which it would
// notice the postmaster's death) keeps the shared memory attached until
// its statement ends, and a new postmaster refuses to start meanwhile.
// The suite's `instance start` waits for such backends (30 s at most), so
// a kill while the machine is busy does not fail the suite on its own
// restart (it did: "pre-existing shared memory block is still in use").
func TestInstanceStartsAfterKillWithBusyBackend(t *testing.T) {
	in := testenv.NewInstance(t, "faults")
	adminURL := in.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	busy := make(chan error, 1)
	go func() {
		// A few seconds of work without a wait (longer on a busy machine).
		_, err := conn.Exec(ctx, `SELECT count(*) FROM generate_series(1, 10000000)`)
		busy <- err
	}()
	waitForActive(ctx, t, adminURL, "generate_series")
	in.Fault(t, "kill")
	start := time.Now()
	in.Start(t) // fails the test if the new postmaster does not start
	t.Logf("the instance started %s after the kill; the busy statement ended with: %v", time.Since(start).Round(time.Millisecond), <-busy)
}

// waitForActive waits until a backend runs a statement containing text.
func waitForActive(ctx context.Context, t *testing.T, adminURL, text string) {
	t.Helper()
	waitForBackends(ctx, t, adminURL, 1, fmt.Sprintf("backend(s) running %q", text),
		`state = 'active' AND pid <> pg_backend_pid() AND strpos(query, $1) > 0`, text)
}
