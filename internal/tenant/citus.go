package tenant

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MinCitusVersion is the oldest Citus release whose schema-based sharding
// Engram relies on (citus_schema_distribute and citus_schema_move, 12.0).
const MinCitusVersion = "12.0"

// ErrCitusUnsupported: the database is a Citus cluster Engram cannot place a
// tenant on (a worker instead of the coordinator, no worker nodes, an old
// Citus, or workers the coordinator cannot reach as the tenant's roles).
// Provisioning stops before it changes anything Citus would refuse later.
var ErrCitusUnsupported = errors.New("citus cluster not supported for tenants")

// Citus describes the Citus side of the database an admin connection
// reaches. The zero value is a plain PostgreSQL database.
type Citus struct {
	// Installed: the citus extension exists in this database.
	Installed bool
	// Version of the citus extension.
	Version string
	// Coordinator: this node is the cluster's coordinator, where tenant
	// schemas are created and every query of the service is sent.
	Coordinator bool
	// Workers are the active primary nodes that may hold shards, as host:port.
	Workers []string
}

// DetectCitus reports whether the database of q is a Citus cluster and
// which node of it q reaches.
func DetectCitus(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) (Citus, error) {
	var c Citus
	err := q.QueryRow(ctx, `SELECT extversion FROM pg_extension WHERE extname = 'citus'`).Scan(&c.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return Citus{}, nil
	}
	if err != nil {
		return c, fmt.Errorf("reading extension citus: %w", err)
	}
	c.Installed = true
	// Group 0 is the coordinator's (also in a database whose nodes are not
	// registered yet, where citus_is_coordinator() is still false).
	if err := q.QueryRow(ctx, `SELECT groupid = 0 FROM pg_dist_local_group`).Scan(&c.Coordinator); err != nil {
		return c, fmt.Errorf("reading pg_dist_local_group: %w", err)
	}
	if !c.Coordinator {
		return c, nil
	}
	rows, err := q.Query(ctx, `SELECT nodename, nodeport FROM pg_dist_node
		WHERE isactive AND noderole = 'primary' AND shouldhaveshards AND groupid <> 0
		ORDER BY nodename, nodeport`)
	if err != nil {
		return c, fmt.Errorf("reading pg_dist_node: %w", err)
	}
	defer rows.Close()
	// Bounded in rows and in bytes a row: a tenant's server that said
	// "coordinator" and listed 1.5 million workers made every look of the
	// transaction reaper keep them all (issue 26's tenth review, HIGH 1).
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != 2 || len(raw[0]) > maxCitusHostBytes {
			return Citus{}, fmt.Errorf("reading pg_dist_node: a worker's name is longer than %d bytes, longer than any host name", maxCitusHostBytes)
		}
		if len(c.Workers) == maxListedCitusWorkers {
			return Citus{}, fmt.Errorf("reading pg_dist_node: %w", &TooManyRowsError{What: "active Citus workers", Limit: maxListedCitusWorkers})
		}
		var host string
		var port int
		if err := rows.Scan(&host, &port); err != nil {
			return c, fmt.Errorf("reading pg_dist_node: %w", err)
		}
		c.Workers = append(c.Workers, net.JoinHostPort(host, strconv.Itoa(port)))
	}
	return c, rows.Err()
}

// citusCoordinator reports whether q reaches a Citus coordinator, all the
// reaper needs to know: two booleans, no list of workers nor any string
// the server chooses (issue 26's tenth review, HIGH 1: the reaper read
// DetectCitus's list at every look, on every node).
func citusCoordinator(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (bool, error) {
	var installed bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')`).Scan(&installed)
	if err != nil {
		return false, fmt.Errorf("reading extension citus: %w", err)
	}
	if !installed {
		return false, nil
	}
	var coordinator bool
	if err := q.QueryRow(ctx, `SELECT groupid = 0 FROM pg_dist_local_group`).Scan(&coordinator); err != nil {
		return false, fmt.Errorf("reading pg_dist_local_group: %w", err)
	}
	return coordinator, nil
}

// check refuses a Citus cluster Engram cannot place tenants on; a plain
// PostgreSQL passes.
func (c Citus) check() error {
	switch {
	case !c.Installed:
		return nil
	case versionLess(c.Version, MinCitusVersion):
		return fmt.Errorf("%w: Citus %s is installed, Engram needs >= %s (schema-based sharding); run ALTER EXTENSION citus UPDATE", ErrCitusUnsupported, c.Version, MinCitusVersion)
	case !c.Coordinator:
		return fmt.Errorf("%w: the admin connection reaches a Citus worker node; it must name the coordinator, where tenant schemas are created and queries are routed", ErrCitusUnsupported)
	case len(c.Workers) == 0:
		return fmt.Errorf("%w: the Citus coordinator has no active worker node that may hold shards; add one with citus_add_node", ErrCitusUnsupported)
	}
	return nil
}

// distributedSchema reports whether schema is a Citus distributed schema.
func distributedSchema(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema string) (bool, error) {
	var yes bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_dist_schema WHERE schemaid = to_regnamespace($1))`, schema).Scan(&yes)
	if err != nil {
		return false, fmt.Errorf("reading pg_dist_schema: %w", err)
	}
	return yes, nil
}

// ensureDistributed makes the tenant schema a distributed schema: Citus then
// creates every table a migration adds to it as a single-shard table, all of
// them on one worker, and routes each query that stays in the schema there.
// It runs after the schema exists, so a schema created before Citus was
// installed, or by a run that stopped between the two steps, is converted
// by the next run (citus_schema_distribute moves existing tables too).
func ensureDistributed(ctx context.Context, conn *pgx.Conn, schema string, res *Result) error {
	yes, err := distributedSchema(ctx, conn, schema)
	if err != nil || yes {
		return err
	}
	if _, err := conn.Exec(ctx, `SELECT citus_schema_distribute(to_regnamespace($1))`, schema); err != nil {
		return fmt.Errorf("%w: citus_schema_distribute(%q) failed: %w", ErrCitusUnsupported, schema, err)
	}
	res.Changes = append(res.Changes, "distributed schema "+schema+" (Citus)")
	return nil
}

// checkWorkerAccess runs one query that Citus routes to the tenant's worker
// as each tenant role, so a cluster whose coordinator cannot log in to the
// workers as those roles is refused at provisioning, not at the first
// request: Citus connects to the workers as the role that runs the query.
// It needs an admin allowed to SET ROLE to them (a superuser, or a member);
// otherwise it is skipped.
func checkWorkerAccess(ctx context.Context, conn *pgx.Conn, schema string, names roleNames) error {
	table := pgx.Identifier{schema, migrationsTable}.Sanitize()
	for _, role := range []string{names.owner, names.login} {
		var can bool
		if err := conn.QueryRow(ctx, `SELECT pg_has_role(current_user, $1, 'MEMBER')`, role).Scan(&can); err != nil {
			return fmt.Errorf("checking membership in %q: %w", role, err)
		}
		if !can {
			continue
		}
		err := inTx(ctx, conn, role, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "SELECT 1 FROM "+table+" LIMIT 1")
			return err
		})
		if err != nil {
			return fmt.Errorf("%w: a query of schema %q as role %q failed on its worker (%w); Citus connects to the workers as the role that runs the query, so the workers must accept the coordinator's connections for every tenant role (certificate or trust authentication between the nodes, or pg_dist_authinfo entries)",
				ErrCitusUnsupported, schema, role, err)
		}
	}
	return nil
}

// Placement says where a tenant's schema lives.
type Placement struct {
	// Citus is false on a plain PostgreSQL (then Worker is empty).
	Citus bool
	// Worker is the node holding the schema's tables, host:port; empty when
	// the schema has no table yet.
	Worker string
}

// SchemaPlacement returns the worker that holds schema's tables on a Citus
// coordinator, or a Placement with Citus false on a plain PostgreSQL.
func SchemaPlacement(ctx context.Context, admin *pgxpool.Pool, schema string) (Placement, error) {
	c, err := DetectCitus(ctx, admin)
	if err != nil || !c.Installed {
		return Placement{}, err
	}
	w, err := schemaWorker(ctx, admin, schema)
	return Placement{Citus: true, Worker: w}, err
}

// schemaWorker returns the node holding schema's tables, host:port, or ""
// when it has none.
func schemaWorker(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema string) (string, error) {
	var host string
	var port int
	err := q.QueryRow(ctx, schemaNodeQuery, schema).Scan(&host, &port)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the placement of schema %q: %w", schema, err)
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}

// ownerLogin lets the owner role log in, without a password, on Citus:
// a migration runs as the owner (SET ROLE), and Citus carries its DDL to
// the worker on a connection it opens as that role, which PostgreSQL
// refuses to a NOLOGIN role. Having no password, the role can still not log
// in by password from outside; only a node the workers trust for every
// role (certificate or trust authentication between the nodes) can.
func ownerLogin(ctx context.Context, conn *pgx.Conn, role string, res *Result) error {
	var canLogin bool
	if err := conn.QueryRow(ctx, `SELECT rolcanlogin FROM pg_roles WHERE rolname = $1`, role).Scan(&canLogin); err != nil {
		return fmt.Errorf("reading role %q: %w", role, err)
	}
	if canLogin {
		return nil
	}
	if _, err := conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD NULL"); err != nil {
		return fmt.Errorf("letting role %q log in on Citus: %w", role, err)
	}
	res.Changes = append(res.Changes, "let role "+role+" log in without a password (Citus)")
	return nil
}

// schemaNodeQuery finds the node of the shards of a distributed schema: all
// its tables share one colocation group, so any shard's placement tells.
const schemaNodeQuery = `SELECT n.nodename, n.nodeport
	FROM pg_dist_schema s
	JOIN pg_dist_partition p ON p.colocationid = s.colocationid
	JOIN pg_dist_shard sh ON sh.logicalrelid = p.logicalrelid
	JOIN pg_dist_placement pl ON pl.shardid = sh.shardid
	JOIN pg_dist_node n ON n.groupid = pl.groupid
	WHERE s.schemaid = to_regnamespace($1)
	ORDER BY sh.shardid LIMIT 1`

// CitusWorkerLockTimeout is the lock_timeout of the tenant roles' sessions
// on the Citus workers; it equals the memory service's default
// (memory.DefaultLockTimeout, which a test keeps equal).
const CitusWorkerLockTimeout = 5 * time.Second

// workerSessionSettings are set on both tenant roles on Citus. The service
// and the operator set lock_timeout, statement_timeout and
// synchronous_commit as startup parameters of their own sessions, which
// reach the coordinator only: the sessions Citus opens on the worker as the
// tenant's role start with the role's settings (Citus propagates ALTER ROLE
// ... SET to every node). So a row lock waited for on the worker is bounded
// by this lock_timeout, and a commit there is synchronous whatever the
// worker's default. (A statement is bounded by the coordinator's
// statement_timeout, which cancels its remote part.)
func workerSessionSettings() []string {
	return []string{
		"lock_timeout=" + strconv.FormatInt(CitusWorkerLockTimeout.Milliseconds(), 10) + "ms",
		"synchronous_commit=on",
	}
}

// ensureWorkerSessionSettings sets workerSessionSettings on the tenant's
// roles where they are missing.
func ensureWorkerSessionSettings(ctx context.Context, conn *pgx.Conn, names roleNames, res *Result) error {
	for _, role := range []string{names.owner, names.login} {
		var config []string
		if err := conn.QueryRow(ctx, `SELECT coalesce(rolconfig, '{}') FROM pg_roles WHERE rolname = $1`, role).Scan(&config); err != nil {
			return fmt.Errorf("reading settings of %q: %w", role, err)
		}
		for _, kv := range workerSessionSettings() {
			if slices.Contains(config, kv) {
				continue
			}
			k, v, _ := strings.Cut(kv, "=")
			if _, err := conn.Exec(ctx, "ALTER ROLE "+pgx.Identifier{role}.Sanitize()+" SET "+k+" = "+quoteLiteral(v)); err != nil {
				return fmt.Errorf("setting %s of %q for its sessions on the Citus workers: %w", k, role, err)
			}
			res.Changes = append(res.Changes, "set "+kv+" on role "+role+" (Citus workers)")
		}
	}
	return nil
}

// ensureSequenceGrants gives the login role USAGE on the schema's sequences
// (those of its identity columns). PostgreSQL fills an identity column
// without checking the sequence's privileges, but Citus takes the value
// with nextval() on the coordinator when it plans an INSERT ... SELECT (a
// delete's history row), which checks them. One GRANT for the whole
// schema, whatever the server lists: a tenant's server that listed 2.5
// million sequences made one GRANT and one Changes line each, until the
// operator held 489 MiB (issue 26's ninth review, HIGH 1). The schema is
// the tenant's own, so a sequence its owner made gets the same USAGE its
// login role could give itself.
func ensureSequenceGrants(ctx context.Context, conn *pgx.Conn, schema string, names roleNames, res *Result) error {
	var missing int64
	err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND CASE WHEN c.relkind = 'S' THEN NOT has_sequence_privilege($2, c.oid, 'USAGE') END`, // CASE: the planner may test the privilege before the kind
		schema, names.login).Scan(&missing)
	if err != nil {
		return fmt.Errorf("reading the sequences of %q: %w", schema, err)
	}
	if missing == 0 {
		return nil
	}
	if _, err := conn.Exec(ctx, "GRANT USAGE ON ALL SEQUENCES IN SCHEMA "+pgx.Identifier{schema}.Sanitize()+" TO "+pgx.Identifier{names.login}.Sanitize()); err != nil {
		return fmt.Errorf("granting USAGE on the sequences of %q to %q: %w", schema, names.login, err)
	}
	res.Changes = append(res.Changes, fmt.Sprintf("granted USAGE on the sequences of schema %s to %s (%d without it; Citus)", schema, names.login, missing))
	return nil
}
