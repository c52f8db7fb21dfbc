package tenant

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one versioned, embedded SQL file.
type Migration struct {
	Version int
	Name    string
	// Concurrent migrations start with the line "-- engram:no-transaction":
	// each statement runs on its own, outside a transaction, so CREATE
	// INDEX CONCURRENTLY can build an index on a large table while the
	// service keeps writing. Their statements must be idempotent (IF NOT
	// EXISTS): an interrupted run is simply run again (see migrateConcurrent).
	Concurrent bool
	sql        *template.Template
}

// noTransactionMarker starts a concurrent migration.
const noTransactionMarker = "-- engram:no-transaction"

// migrationVars are the values a migration's template may use. Every one is
// an already quoted identifier or a type built from one, never raw input.
type migrationVars struct {
	Schema string // quoted schema, e.g. "engram_team_a_bot"
	Vector string // quoted vector type with its size, e.g. "public"."vector"(384)
	// OwnerVectors: the vectors are small enough for the covering index of
	// migration 7 (Dimensions <= OwnerVectorsMaxDims).
	OwnerVectors        bool
	OwnerVectorsMaxDims int
	// ExtSchema is the quoted schema of pgvector (a function's pinned
	// search_path names it for the vector operators).
	ExtSchema string
	// Citus: the schema is a distributed schema of a Citus coordinator.
	Citus bool
}

// newMigrationVars are the template values of schema's migrations.
func newMigrationVars(schema string, dims int, on migrationTarget) migrationVars {
	return migrationVars{Schema: pgx.Identifier{schema}.Sanitize(), Vector: on.vectorType,
		OwnerVectors: dims <= OwnerVectorsMaxDims, OwnerVectorsMaxDims: OwnerVectorsMaxDims,
		ExtSchema: pgx.Identifier{on.extSchema}.Sanitize(), Citus: on.citus}
}

// migrationTarget is where migrate applies migrations, beside the schema.
type migrationTarget struct {
	vectorType string // as migrationVars.Vector
	extSchema  string // unquoted
	citus      bool
	// replay: a new schema replays every migration (install.go says when
	// it is installed in one step instead).
	replay bool
}

// OwnerVectorsMaxDims is the largest vector size the covering index
// memories_owner_vectors_idx (migration 7; memories_active_vectors_idx
// since migration 12, whose tuple is 24 bytes narrower) is built for. The
// widest tuple of migration 7's:
// 16 bytes of header and null bitmap, the longest owner id (256 bytes + 4 of
// length, padded to 264), md5(content) (33 + 3), the vector (8 + 4 per
// dimension), the uuid (16), active (1, padded to 8) and two timestamps (16)
// must stay under btree's 2,704 bytes: (2704 - 364) / 4 = 585, rounded down
// to a multiple of 64. The memory engine reads through the index only up to
// this size; larger vectors keep the owner index path.
const OwnerVectorsMaxDims = 576

var migrations = mustLoadMigrations()

// LatestVersion is the schema version this binary migrates to.
var LatestVersion = migrations[len(migrations)-1].Version

func mustLoadMigrations() []Migration {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(err)
	}
	var out []Migration
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil {
			panic("migration file without a version prefix: " + e.Name())
		}
		body, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			panic(err)
		}
		tmpl := template.Must(template.New(e.Name()).Option("missingkey=error").Parse(string(body)))
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(e.Name(), ".sql"), sql: tmpl,
			Concurrent: strings.HasPrefix(string(body), noTransactionMarker)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			panic(fmt.Sprintf("migrations must be numbered 1..n without gaps; found %d at position %d", m.Version, i+1))
		}
	}
	return out
}

const migrationsTable = "schema_migrations"

// currentVersion reads the highest applied migration of schema; 0 when none.
func currentVersion(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema string) (int, error) {
	var v int
	err := q.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+pgx.Identifier{schema, migrationsTable}.Sanitize()).Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table: never migrated
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading schema version of %q: %w", schema, err)
	}
	return v, nil
}

// migrate applies every pending migration to schema, each in its own
// transaction running as the owner role (so the owner owns what it creates);
// a schema with none applied yet gets them all in one step instead
// (installFresh), unless on Citus or on.replay. The caller holds the
// tenant's provisioning lease. It returns the versions applied.
func migrate(ctx context.Context, conn *pgx.Conn, names roleNames, schema string, dims int, on migrationTarget, target int, indexTimeout, lockTimeout time.Duration) ([]int, error) {
	table := pgx.Identifier{schema, migrationsTable}.Sanitize()
	create := "CREATE TABLE IF NOT EXISTS " + table + ` (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`
	current, err := currentVersion(ctx, conn, schema)
	if err != nil {
		return nil, err
	}
	if current == 0 && !on.citus && !on.replay {
		return installFresh(ctx, conn, names.owner, table, create, newMigrationVars(schema, dims, on), target)
	}
	if err := inTx(ctx, conn, names.owner, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return nil
		}
		_, err := tx.Exec(ctx, create)
		return err
	}); err != nil {
		return nil, fmt.Errorf("creating %s: %w", table, err)
	}

	if current > 0 {
		// The table's own size decides, not the spec's (a mismatch is
		// refused after migrating, by checkDimensions), for the covering
		// indexes and for a vector type a migration names (a function's
		// argument): a re-embed may have changed it since the schema was
		// created.
		if dims, err = Dimensions(ctx, conn, schema); err != nil {
			return nil, err
		}
		on.vectorType = vectorTypeOf(on.extSchema, dims)
	}
	vars := newMigrationVars(schema, dims, on)
	var applied []int
	for _, m := range migrations {
		if m.Version <= current || m.Version > target {
			continue
		}
		var sql bytes.Buffer
		if err := m.sql.Execute(&sql, vars); err != nil {
			return applied, fmt.Errorf("rendering migration %s: %w", m.Name, err)
		}
		var err error
		if m.Concurrent {
			err = migrateConcurrent(ctx, conn, names.owner, schema, sql.String(), indexTimeout, lockTimeout)
		}
		if err == nil {
			err = inTx(ctx, conn, names.owner, func(tx pgx.Tx) error {
				if !m.Concurrent {
					// One statement at a time: Citus forwards some DDL to
					// the worker with its whole query string, which the
					// worker refuses when it holds several commands.
					for _, stmt := range splitStatements(sql.String()) {
						if _, err := tx.Exec(ctx, stmt); err != nil {
							return fmt.Errorf("%s: %w", firstLine(stmt), err)
						}
					}
				}
				_, err := tx.Exec(ctx, "INSERT INTO "+table+" (version, name) VALUES ($1, $2)", m.Version, m.Name)
				return err
			})
		}
		if err != nil {
			return applied, fmt.Errorf("applying migration %s to schema %q: %w", m.Name, schema, err)
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}

// vectorTypeOf is pgvector's type of dims dimensions, quoted (migrationVars.Vector).
func vectorTypeOf(extSchema string, dims int) string {
	return pgx.Identifier{extSchema, "vector"}.Sanitize() + fmt.Sprintf("(%d)", dims)
}

// inTx runs fn in a transaction as role (SET LOCAL ROLE), committing on success.
func inTx(ctx context.Context, conn *pgx.Conn, role string, fn func(pgx.Tx) error) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if role != "" {
		if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
			return fmt.Errorf("SET ROLE %s: %w", role, err)
		}
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
