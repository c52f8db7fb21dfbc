package tenant

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrMoveInProgress: another shard move or rebalance runs on the Citus
// cluster; a move waits for it to end (retry later).
var ErrMoveInProgress = errors.New("another shard move runs on the Citus cluster")

// MoveSpec says which tenant to move where.
type MoveSpec struct {
	Schema string
	// Owner must match the schema's ownership marker (a runtime moves only
	// its own schema).
	Owner Owner
	// To is the target worker as host:port, as pg_dist_node names it.
	To string
	// Started, when set, is called once the checks have passed and the
	// schema is about to be moved (not for a refused move, nor for a
	// schema already on To).
	Started func()
	// Progress, when set, is called about once a second while the move
	// copies, with the bytes copied so far and the bytes to copy.
	Progress func(MoveProgress)
}

// MoveProgress is a reading of get_rebalance_progress() during a move.
type MoveProgress struct {
	Copied, Total int64
}

// MoveResult says what MoveSchema did.
type MoveResult struct {
	From, To string
	// Moved is false when the schema already was on To (nothing done).
	Moved    bool
	Duration time.Duration
}

// MoveSchema moves a tenant's distributed schema, every table of it, to
// another worker with citus_schema_move, online: the copy and the catch-up
// run with logical replication while the service keeps reading and
// writing, and writes pause only for the final switch of the placement.
//
// It holds the tenant's provisioning lease for the whole move, so a move
// never runs beside a provisioning, a migration, a drop or another move of
// the same tenant (each waits up to lockWait, then is refused), and it
// refuses while Citus reports another move anywhere in the cluster
// (ErrMoveInProgress).
func MoveSchema(ctx context.Context, admin *pgxpool.Pool, spec MoveSpec) (*MoveResult, error) {
	host, portText, err := net.SplitHostPort(spec.To)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil || host == "" {
		return nil, fmt.Errorf("moving schema %q: target %q is not host:port", spec.Schema, spec.To)
	}
	res := &MoveResult{To: spec.To}
	err = withTenantLock(ctx, admin, spec.Schema, func(conn *pgx.Conn) error {
		if err := checkMovable(ctx, conn, spec); err != nil {
			return err
		}
		p, err := SchemaPlacement(ctx, admin, spec.Schema)
		if err != nil {
			return err
		}
		if p.Worker == "" {
			return fmt.Errorf("schema %q has no table yet: nothing to move", spec.Schema)
		}
		res.From = p.Worker
		if p.Worker == spec.To {
			return nil
		}
		if spec.Started != nil {
			spec.Started()
		}
		stop := watchMove(ctx, admin, spec.Schema, spec.Progress)
		start := time.Now()
		_, err = conn.Exec(ctx, `SELECT citus_schema_move(to_regnamespace($1), $2, $3, shard_transfer_mode => 'force_logical')`,
			spec.Schema, host, port)
		stop()
		res.Duration = time.Since(start)
		if err != nil {
			return fmt.Errorf("citus_schema_move to %s: %w", spec.To, err)
		}
		res.Moved = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("moving schema %q: %w", spec.Schema, err)
	}
	return res, nil
}

// checkMovable refuses a schema that is not this runtime's, not a
// distributed schema, a target that is no active worker, and a cluster
// where another move runs.
func checkMovable(ctx context.Context, conn *pgx.Conn, spec MoveSpec) error {
	c, err := DetectCitus(ctx, conn)
	if err != nil {
		return err
	}
	if !c.Installed {
		return fmt.Errorf("%w: the database is not a Citus cluster", ErrCitusUnsupported)
	}
	if err := c.check(); err != nil {
		return err
	}
	exists, m, err := schemaState(ctx, conn, spec.Schema)
	if err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("schema %q does not exist; provision the tenant first", spec.Schema)
	}
	if err := mustOwn(m, spec.Owner, "schema", spec.Schema); err != nil {
		return err
	}
	if yes, err := distributedSchema(ctx, conn, spec.Schema); err != nil {
		return err
	} else if !yes {
		return fmt.Errorf("%w: schema %q is not a distributed schema; provision it on the coordinator first", ErrCitusUnsupported, spec.Schema)
	}
	if !slices.Contains(c.Workers, spec.To) {
		return fmt.Errorf("%w: %s is not an active worker that may hold shards (workers: %v)", ErrCitusUnsupported, spec.To, c.Workers)
	}
	var running int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM get_rebalance_progress()`).Scan(&running); err != nil {
		return fmt.Errorf("reading get_rebalance_progress(): %w", err)
	}
	if running > 0 {
		return fmt.Errorf("%w (%d shards in flight); retry when it has ended", ErrMoveInProgress, running)
	}
	return nil
}

// watchMove calls progress about once a second with the sums of
// get_rebalance_progress() over schema's tables until the returned stop is
// called (another move that started meanwhile, a DBA's rebalance say, is
// not counted as this one's).
func watchMove(ctx context.Context, admin *pgxpool.Pool, schema string, progress func(MoveProgress)) (stop func()) {
	if progress == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var p MoveProgress
			err := admin.QueryRow(ctx, `SELECT coalesce(sum(target_shard_size), 0)::bigint, coalesce(sum(source_shard_size), 0)::bigint
				FROM get_rebalance_progress() AS r JOIN pg_catalog.pg_class AS c ON c.oid = r.table_name::oid
				WHERE c.relnamespace = to_regnamespace($1)`, pgx.Identifier{schema}.Sanitize()).Scan(&p.Copied, &p.Total)
			if err == nil && p.Total > 0 {
				progress(p)
			}
		}
	}()
	return func() { cancel(); <-done }
}
