package tenant

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ServerInfo is what Inspect found about the PostgreSQL database an admin
// connection reaches: what the operator shows in a MemoryDatabase's status
// and places tenants by.
type ServerInfo struct {
	// Version is the server's version number (server_version without the
	// distribution's suffix), such as "17.5".
	Version string
	// Extensions installed in the database, by name.
	Extensions []ExtensionInfo
	// Citus is set when the citus extension is installed.
	Citus *CitusInfo
	// Bytes is the size of the database: pg_database_size, on a Citus
	// coordinator plus that of every worker that answered.
	Bytes int64
}

// ExtensionInfo is one installed extension.
type ExtensionInfo struct {
	Name, Version string
}

// CitusInfo is the Citus side of a database.
type CitusInfo struct {
	Version string
	// Coordinator: the connection reaches the coordinator (tenant schemas
	// are created there).
	Coordinator bool
	// Workers are the active primary nodes that may hold shards, as host:port.
	Workers []string
}

// Inspect reads the version, the extensions, Citus's worker nodes and the
// size of the database of admin, on one connection of the pool: a few
// catalogue reads, cheap enough to run every minute for every database.
func Inspect(ctx context.Context, admin *pgxpool.Pool) (_ *ServerInfo, err error) {
	c, err := admin.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting as admin: %w", err)
	}
	defer c.Release()
	conn := c.Conn()
	defer func() { err = withRefusal(conn, err) }()
	info := &ServerInfo{}
	var version string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version'), pg_database_size(current_database())`).Scan(&version, &info.Bytes); err != nil {
		return nil, fmt.Errorf("reading the server version and database size: %w", err)
	}
	info.Version, _, _ = strings.Cut(version, " ")
	if info.Extensions, err = installedExtensions(ctx, conn); err != nil {
		return nil, err
	}
	for _, e := range info.Extensions {
		if e.Name == "citus" {
			info.Citus = &CitusInfo{Version: e.Version}
		}
	}
	if info.Citus != nil {
		if err := inspectCitus(ctx, conn, info); err != nil {
			return nil, err
		}
	}
	return info, nil
}

func installedExtensions(ctx context.Context, conn *pgx.Conn) ([]ExtensionInfo, error) {
	rows, err := conn.Query(ctx, `SELECT extname, extversion FROM pg_extension ORDER BY extname`)
	if err != nil {
		return nil, fmt.Errorf("listing the extensions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ExtensionInfo, error) {
		var e ExtensionInfo
		return e, r.Scan(&e.Name, &e.Version)
	})
	if err != nil {
		return nil, fmt.Errorf("listing the extensions: %w", err)
	}
	return out, nil
}

// inspectCitus fills in whether conn reaches the coordinator, its workers
// and their sizes. A worker that does not answer is left out of the size
// (run_command_on_workers reports it instead of failing): the size is a
// placement hint, and a down worker shows in Citus's own health checks.
func inspectCitus(ctx context.Context, conn *pgx.Conn, info *ServerInfo) error {
	if err := conn.QueryRow(ctx, `SELECT citus_is_coordinator()`).Scan(&info.Citus.Coordinator); err != nil {
		if isMissingFunction(err) {
			return nil // a Citus too old to say; report it as installed only
		}
		return fmt.Errorf("asking citus_is_coordinator(): %w", err)
	}
	if !info.Citus.Coordinator {
		return nil
	}
	rows, err := conn.Query(ctx, `SELECT nodename, nodeport FROM pg_dist_node
		WHERE isactive AND noderole = 'primary' AND shouldhaveshards AND groupid <> 0
		ORDER BY nodename, nodeport`)
	if err != nil {
		return fmt.Errorf("reading pg_dist_node: %w", err)
	}
	workers, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var host string
		var port int
		err := r.Scan(&host, &port)
		return net.JoinHostPort(host, strconv.Itoa(port)), err
	})
	if err != nil {
		return fmt.Errorf("reading pg_dist_node: %w", err)
	}
	info.Citus.Workers = workers
	if len(workers) == 0 {
		return nil
	}
	var onWorkers int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(result::bigint), 0)::bigint
		FROM run_command_on_workers('SELECT pg_database_size(current_database())') WHERE success`).Scan(&onWorkers); err != nil {
		return fmt.Errorf("reading the workers' database sizes: %w", err)
	}
	info.Bytes += onWorkers
	return nil
}

// isMissingFunction reports whether PostgreSQL said the function does not exist.
func isMissingFunction(err error) bool {
	var pgErr interface{ SQLState() string }
	return errors.As(err, &pgErr) && pgErr.SQLState() == "42883"
}
