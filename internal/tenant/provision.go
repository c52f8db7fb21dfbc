// Package tenant provisions the PostgreSQL side of an Engram tenant with an
// admin connection: a schema with pgvector tables, a NOLOGIN role owning them
// and a LOGIN role for the memory service that can use only that schema.
// It has no Kubernetes imports; the operator calls it.
package tenant

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// MinVectorVersion is the oldest pgvector release Engram supports.
const MinVectorVersion = "0.7.0"

// Errors callers can tell apart with errors.Is.
var (
	// ErrExtensionMissing: pgvector is not installed and cannot be created.
	ErrExtensionMissing = errors.New("extension vector (pgvector) is missing")
	// ErrDimensionsMismatch: the schema exists with another vector size.
	ErrDimensionsMismatch = errors.New("embedding dimensions differ from the existing schema")
)

// Spec says what to provision.
type Spec struct {
	// Schema is the tenant schema; see SchemaName for the default.
	Schema string
	// Dimensions of the embedding vectors: those of a new schema, and those
	// an existing schema's columns must have (a re-embed changes them, and
	// the caller then passes the new size: the operator passes its
	// status.embedding's, the embedder of the stored vectors).
	Dimensions int
	// SwitchingTo is the size a re-embed under way switches the columns
	// to (0: none under way). A switch commits before the caller can
	// record it; should that record be lost, the columns already have this
	// size, and refusing them would stop the caller before it reads the
	// re-embed's state and records the switch (review 13, H1).
	SwitchingTo int
	// Owner is the runtime the tenant belongs to; its UID is written into
	// the ownership marker of the schema and both roles.
	Owner Owner
	// Claim says when an existing schema without this UID may be taken.
	Claim Claim
	// IndexTimeout bounds each CREATE INDEX CONCURRENTLY of a migration;
	// zero means DefaultIndexTimeout.
	IndexTimeout time.Duration
	// Blockers says how long another tenant's session may make a
	// provisioning statement wait before it is ended, and whom to tell.
	Blockers BlockerPolicy
	// Connections sizes the login role's CONNECTION LIMIT.
	Connections ConnectionPolicy
	// TempFileLimit is the login role's temp_file_limit (a PostgreSQL
	// size, e.g. DefaultTempFileLimit); "" leaves it alone.
	TempFileLimit string
	// TextSearchConfig is the text search configuration of the tenant's
	// full-text search (a name of pg_ts_config; the policy allows the ones
	// PostgreSQL ships); "" keeps the tenant's (English for a new one,
	// migration 18). A change builds
	// the new text index concurrently before searches switch to it
	// (textsearch.go).
	TextSearchConfig string
	// FailAfter is a test seam, nil in production: when set, it is called
	// after each step of provisioning ("role created", "schema created",
	// "migrated", "granted"; and "login role created, not marked", inside
	// the transaction that creates a role that logs in, which an error
	// rolls back), and an error it returns ends Provision there,
	// as if the operator had died between two steps. Tests use it to prove
	// that every partial state converges on the next run.
	FailAfter func(step string) error
	// Replay is a test seam, false in production: a new schema replays
	// every migration one by one, as an upgrade does, instead of being
	// installed in one step (install.go). Tests use it to build a schema
	// both ways and compare them, and to exercise what only upgrades do
	// since (concurrent index builds and the blocker watch behind them).
	Replay bool
}

// after calls the FailAfter test seam, if any, after step.
func (s Spec) after(step string) error {
	if s.FailAfter == nil {
		return nil
	}
	if err := s.FailAfter(step); err != nil {
		return fmt.Errorf("injected fault after %s: %w", step, err)
	}
	return nil
}

// Result says what Provision found and did.
type Result struct {
	Schema          string
	OwnerRole       string
	LoginRole       string
	ExtensionSchema string
	// Password of the login role, set only when Provision created the role;
	// otherwise the caller keeps the one it has (or calls RotatePassword).
	Password string
	// Version is the schema version after provisioning.
	Version int
	// Citus is set when the database is a Citus coordinator: the schema is
	// a distributed schema and Worker (host:port) is the node holding it.
	Citus  bool
	Worker string
	// ConnectionLimit is the login role's CONNECTION LIMIT (-1: none).
	ConnectionLimit int
	// ConnectionShortfall, when not empty, says for humans that the
	// runtime needs more connections than its limit (ConnectionPolicy.Need).
	// It is said when the limit was set or changed in this pass only (a
	// pass that finds it in place says nothing: it was said then).
	ConnectionShortfall string
	// Changes lists, for humans, what was created or repaired; empty when
	// everything was already in place.
	Changes []string
	// TextSearchSwitched says that this pass switched the tenant's text
	// search to another configuration (the operator paces switches).
	TextSearchSwitched bool
	// Warnings lists, for humans, what is wrong and the admin may not
	// repair (a DBA must): provisioning succeeded all the same.
	Warnings []string
}

// Changed reports whether Provision changed anything.
func (r *Result) Changed() bool { return len(r.Changes) > 0 }

type roleNames struct{ owner, login string }

func (s Spec) roles() roleNames {
	return roleNames{owner: OwnerRole(s.Schema), login: LoginRole(s.Schema)}
}

func (s Spec) validate() error {
	if !ValidSchemaName(s.Schema) {
		return fmt.Errorf("invalid schema name %q: use 1-63 characters of [a-z0-9_], starting with a letter or _, not pg_*", s.Schema)
	}
	if s.Owner.UID == "" || s.Owner.Namespace == "" || s.Owner.Name == "" {
		return fmt.Errorf("provisioning schema %q: the owner's UID, namespace and name are required", s.Schema)
	}
	if s.Dimensions < 1 || s.Dimensions > 16000 {
		return fmt.Errorf("invalid dimensions %d: must be 1..16000", s.Dimensions)
	}
	return nil
}

// Provision creates or repairs the tenant of spec and migrates it to
// LatestVersion. It is idempotent: a second run changes nothing and returns
// no Changes. Two operators never provision the same schema at once (a row
// lock in ControlSchema). It refuses, changing nothing, a schema or role
// that Engram did not create or created for another runtime (ownership.go).
func Provision(ctx context.Context, admin *pgxpool.Pool, spec Spec) (*Result, error) {
	return provisionTo(ctx, admin, spec, LatestVersion)
}

// provisionTo is Provision migrating up to version target (tests use it to
// build an old schema and upgrade it).
func provisionTo(ctx context.Context, admin *pgxpool.Pool, spec Spec, target int) (*Result, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	names := spec.roles()
	res := &Result{Schema: spec.Schema, OwnerRole: names.owner, LoginRole: names.login}
	err := withTenantLock(ctx, admin, spec.Schema, func(conn *pgx.Conn) (err error) {
		// Other tenants' sessions must not make it wait for long (a held
		// snapshot stalls every CREATE INDEX CONCURRENTLY of the database).
		watch := startBlockerWatch(ctx, admin.Config().ConnConfig, int(conn.PgConn().PID()), spec.Owner, spec.Blockers)
		defer func() {
			if blockers := watch.stop(); err != nil && len(blockers) > 0 {
				err = &BlockedError{Err: err, Blockers: blockers, More: watch.notKeptCount()}
			}
		}()
		extSchema, err := ensureExtension(ctx, conn, res)
		if err != nil {
			return err
		}
		res.ExtensionSchema = extSchema
		// withTenantLock has refused a Citus node tenants cannot live on.
		citus, err := DetectCitus(ctx, conn)
		if err != nil {
			return err
		}
		res.Citus = citus.Installed
		// Decide on every object before changing any, so a refusal leaves
		// nothing behind: no role created, no password set, no comment written.
		plan, err := claimTenant(ctx, conn, spec, names)
		if err != nil {
			return err
		}
		// A runtime beyond its namespace's connection share is refused
		// before its role exists.
		if err := admitAndCreateRoles(ctx, conn, spec, names, plan, citus.Installed, res); err != nil {
			return err
		}
		if err := spec.after("role created"); err != nil {
			return err
		}
		if err := ensureSchema(ctx, conn, spec, names, plan, res); err != nil {
			return err
		}
		if err := spec.after("schema created"); err != nil {
			return err
		}
		if citus.Installed {
			if err := ensureDistributed(ctx, conn, spec.Schema, res); err != nil {
				return err
			}
		}
		applied, err := migrate(ctx, conn, names, spec.Schema, spec.Dimensions,
			migrationTarget{vectorType: vectorTypeOf(extSchema, spec.Dimensions), extSchema: extSchema, citus: citus.Installed, replay: spec.Replay}, target, spec.IndexTimeout, spec.Blockers.lockTimeout())
		for _, v := range applied {
			res.Changes = append(res.Changes, fmt.Sprintf("applied migration %d", v))
		}
		if err != nil {
			return err
		}
		if err := spec.after("migrated"); err != nil {
			return err
		}
		if err := checkDimensions(ctx, conn, spec); err != nil {
			return err
		}
		if res.Version, err = currentVersion(ctx, conn, spec.Schema); err != nil {
			return err
		}
		if res.Version >= textSearchVersion {
			created := slices.Contains(applied, textSearchVersion)
			if err := ensureTextSearch(ctx, conn, spec, names, spec.Blockers.lockTimeout(), created, res); err != nil {
				return err
			}
		}
		if plan.frozen {
			// Frozen for a move: granting would lift the freeze; only the
			// move's Unfreeze gives the grants back (relocate_freeze.go).
			res.Warnings = append(res.Warnings, "schema "+spec.Schema+" is frozen for a move to another server: its login role's write grants stay revoked")
		} else if err := ensureGrants(ctx, conn, spec.Schema, extSchema, names, res); err != nil {
			return err
		}
		if err := ensureConnectionLimit(ctx, conn, spec.Connections, spec.Owner, names, res); err != nil {
			return err
		}
		if err := ensureTempFileLimit(ctx, conn, spec.TempFileLimit, names, res); err != nil {
			return err
		}
		if citus.Installed {
			if err := ensureWorkerSessionSettings(ctx, conn, names, res); err != nil {
				return err
			}
			if err := ensureSequenceGrants(ctx, conn, spec.Schema, names, res); err != nil {
				return err
			}
			if err := checkWorkerAccess(ctx, conn, spec.Schema, names); err != nil {
				return err
			}
			if res.Worker, err = schemaWorker(ctx, conn, spec.Schema); err != nil {
				return err
			}
		}
		return spec.after("granted")
	})
	if err != nil {
		return nil, fmt.Errorf("provisioning schema %q: %w", spec.Schema, err)
	}
	return res, nil
}

// checkDimensions refuses a spec whose vector size differs from the table's.
func checkDimensions(ctx context.Context, conn *pgx.Conn, spec Spec) error {
	dims, err := Dimensions(ctx, conn, spec.Schema)
	if err != nil {
		return err
	}
	return decideDimensions(spec.Schema, dims, spec.Dimensions, spec.SwitchingTo)
}

// decideDimensions is the rule of checkDimensions: an existing schema keeps
// its vector size; only a re-embed changes it (every embedding recomputed
// into a column of the new size: internal/memory/reembed), so while one is
// under way the size it switches to is accepted too.
func decideDimensions(schema string, have, want, switchingTo int) error {
	if have != want && (switchingTo == 0 || have != switchingTo) {
		return fmt.Errorf("%w: schema %q stores %d-dimensional vectors, the runtime records %d", ErrDimensionsMismatch, schema, have, want)
	}
	return nil
}

// Dimensions returns the vector size of the schema's memories table.
func Dimensions(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema string) (int, error) {
	var dims int
	err := q.QueryRow(ctx, `SELECT a.atttypmod FROM pg_attribute a
		WHERE a.attrelid = to_regclass($1) AND a.attname = 'embedding'`,
		pgx.Identifier{schema, "memories"}.Sanitize()).Scan(&dims)
	if err != nil {
		return 0, fmt.Errorf("reading vector size of %q.memories: %w", schema, err)
	}
	return dims, nil
}

// quoteLiteral quotes s as a SQL string literal (for statements such as
// COMMENT and CREATE ROLE ... PASSWORD, which take no bind parameters).
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
