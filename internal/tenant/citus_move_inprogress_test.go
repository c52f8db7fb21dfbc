package tenant

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestCitusMoveRefusedWhileAnotherMoveRuns: a move of schema Y while a move
// of schema X (another tenant, so another lease) runs is refused with
// ErrMoveInProgress, X's move reports the progress of its own schema's
// shards meanwhile, and X's move still ends well.
//
// Deterministic, no timing luck: the test holds pg_dist_cleanup of its own
// database in ACCESS EXCLUSIVE mode. citus_move_shard_placement sets up
// its rebalance monitor (what get_rebalance_progress() reads) and then runs
// CALL citus_cleanup_orphaned_resources() on a connection of its own
// (shard_transfer.c: SetupRebalanceMonitorForShardTransfer, then
// DropOrphanedResourcesInSeparateTransaction), which reads pg_dist_cleanup:
// so X's move waits there, with its monitor up, until the test lets go.
// The hold lasts as long as the refusal takes (well under a second): the
// monitor is visible to get_rebalance_progress() in every database of the
// coordinator, so other tests' moves would be refused meanwhile.
func TestCitusMoveRefusedWhileAnotherMoveRuns(t *testing.T) {
	pool, url := citusPool(t)
	ctx := testCtx(t)
	x, y := newSpec(uniqueSchema(t, "citus_mv_x"), 8), newSpec(uniqueSchema(t, "citus_mv_y"), 8)
	resX := mustProvision(t, pool, url, x)
	resY := mustProvision(t, pool, url, y)
	c, err := DetectCitus(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	other := func(w string) string {
		if c.Workers[0] == w {
			return c.Workers[1]
		}
		return c.Workers[0]
	}

	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	hold, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(context.Background()) }()
	for _, s := range []string{"SET LOCAL lock_timeout = '10s'", "SET LOCAL statement_timeout = '60s'",
		"LOCK TABLE pg_catalog.pg_dist_cleanup IN ACCESS EXCLUSIVE MODE"} {
		if _, err := hold.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}

	type outcome struct {
		res *MoveResult
		err error
	}
	moved := make(chan outcome, 1)
	readings := make(chan MoveProgress, 64)
	go func() {
		// Other packages' tests move schemas on the same Citus cluster at
		// the same time (make test runs packages in parallel): X's move
		// waits for theirs, within a bound, before it can be the one in
		// flight (the test's context ends at 2 minutes).
		for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(time.Second) {
			res, err := MoveSchema(ctx, pool, MoveSpec{Schema: x.Schema, Owner: x.Owner, To: other(resX.Worker),
				Progress: func(p MoveProgress) {
					select {
					case readings <- p:
					default:
					}
				}})
			if !errors.Is(err, ErrMoveInProgress) || time.Now().After(deadline) {
				moved <- outcome{res, err}
				return
			}
		}
	}()
	// X's move is past its monitor once its cleanup call waits on the lock.
	waitErr := waitFor(ctx, 100*time.Second, func() (bool, error) {
		select {
		case o := <-moved:
			return false, fmt.Errorf("X's move ended before it waited on pg_dist_cleanup: %+v, %v", o.res, o.err)
		default:
		}
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND query LIKE 'CALL citus_cleanup_orphaned_resources()%' AND wait_event_type = 'Lock'`).Scan(&n)
		return n > 0, err
	})
	if waitErr != nil {
		t.Fatalf("waiting for X's move to reach its cleanup call: %v", waitErr)
	}

	_, errY := MoveSchema(ctx, pool, MoveSpec{Schema: y.Schema, Owner: y.Owner, To: other(resY.Worker)})
	// X's progress counts X's shards: read once a second while it runs.
	var got MoveProgress
	select {
	case got = <-readings:
	case <-time.After(10 * time.Second):
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got.Total <= 0 {
		t.Errorf("X's move reported no progress of its schema's shards while it ran: %+v", got)
	}
	if !errors.Is(errY, ErrMoveInProgress) {
		t.Errorf("a move of Y while X's move runs: %v; want ErrMoveInProgress", errY)
	}
	o := <-moved
	if o.err != nil || !o.res.Moved || o.res.To != other(resX.Worker) {
		t.Fatalf("X's move after the hold: %+v, %v; want moved to %s", o.res, o.err, other(resX.Worker))
	}
	if p, err := SchemaPlacement(ctx, pool, y.Schema); err != nil || p.Worker != resY.Worker {
		t.Fatalf("Y after its refused move: %+v, %v; want still on %s", p, err, resY.Worker)
	}
}

// waitFor polls done every 50 ms until it reports true, fails, or limit
// passes.
func waitFor(ctx context.Context, limit time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("not within %s", limit)
}
