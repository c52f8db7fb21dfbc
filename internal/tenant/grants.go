package tenant

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// tableGrants is the least privilege of the login role on each tenant table:
// DML where the service needs it, nothing else (no TRUNCATE, REFERENCES,
// TRIGGER, no DDL: the owner role owns the tables and the login role is not
// a member of it).
var tableGrants = map[string][]string{
	"memories":          {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"memory_history":    {"SELECT", "INSERT", "DELETE"},
	"schema_migrations": {"SELECT"},
	// Row locks (SELECT ... FOR UPDATE needs UPDATE); erase removes an owner's row.
	"owner_locks": {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"job_locks":   {"SELECT", "UPDATE"},
	// Compaction's per-owner cursor and watermark; erase removes an owner's row.
	"compaction_state": {"SELECT", "INSERT", "UPDATE", "DELETE"},
	// Access statistics (upserted by search and context; purge, eviction and erase delete).
	"memory_access": {"SELECT", "INSERT", "UPDATE", "DELETE"},
	// Conversations: sessions are row-locked by appends and compaction and
	// carry counters; messages are append-only (deleted with their session);
	// summaries get their parent set when condensed.
	"sessions":        {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"messages":        {"SELECT", "INSERT", "DELETE"},
	"summaries":       {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"summary_sources": {"SELECT", "INSERT", "DELETE"},
	// Long-term memory: episodes are rewritten only by erase/delete;
	// documents are updated in place; their changes are append-only.
	"episodes":         {"SELECT", "INSERT", "DELETE"},
	"documents":        {"SELECT", "INSERT", "UPDATE", "DELETE"},
	"document_changes": {"SELECT", "INSERT", "DELETE"},
	// The text search configuration is the operator's to change.
	"text_search": {"SELECT"},
	// The re-embed state: the operator begins, switches and aborts
	// (internal/memory/reembed); the login role reads it, and may update
	// only the fill's count (columnGrants).
	"reembed": {"SELECT"},
	// Where decay's walk stopped (migration 22): the job moves it on.
	"job_cursors": {"SELECT", "INSERT", "UPDATE"},
}

// columnGrants are the login role's column privileges where a table-level
// one would give too much. The re-embed fill locks the state row (a row
// lock needs UPDATE on some column) and counts what it filled; with UPDATE
// on the whole row a tenant could rewrite the phase or the embedder the
// operator records and trusts.
var columnGrants = map[string]map[string][]string{
	"reembed": {"UPDATE": {"filled", "updated_at"}},
}

// maintainTables may be vacuumed and analyzed by the compact job; the
// MAINTAIN privilege exists from PostgreSQL 17 on.
var maintainTables = []string{"memories", "memory_history"}

// ensureGrants checks every privilege the login role needs (and the few it
// must not have) and repairs only what is wrong, so a healthy tenant sees no
// catalog writes. It doubles as the periodic grant verification.
func ensureGrants(ctx context.Context, conn *pgx.Conn, schema, extSchema string, names roleNames, res *Result) error {
	login := pgx.Identifier{names.login}.Sanitize()
	grant := func(what, stmt string) error {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("granting %s to %q: %w", what, names.login, err)
		}
		res.Changes = append(res.Changes, "granted "+what+" to "+names.login)
		return nil
	}

	var usage bool
	if err := conn.QueryRow(ctx, `SELECT has_schema_privilege($1, $2, 'USAGE')`, names.login, schema).Scan(&usage); err != nil {
		return fmt.Errorf("checking schema usage: %w", err)
	}
	if !usage {
		if err := grant("USAGE on schema "+schema, "GRANT USAGE ON SCHEMA "+pgx.Identifier{schema}.Sanitize()+" TO "+login); err != nil {
			return err
		}
	}

	var serverVersion int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&serverVersion); err != nil {
		return err
	}
	tables := make([]string, 0, len(tableGrants))
	for t := range tableGrants {
		tables = append(tables, t)
	}
	slices.Sort(tables)
	for _, table := range tables {
		privs := tableGrants[table]
		if serverVersion >= 170000 && slices.Contains(maintainTables, table) {
			privs = append(slices.Clone(privs), "MAINTAIN")
		}
		qualified := pgx.Identifier{schema, table}.Sanitize()
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, qualified).Scan(&exists); err != nil {
			return fmt.Errorf("looking for %s: %w", qualified, err)
		}
		if !exists {
			continue // created by a later migration than the schema is at (tests build old schemas)
		}
		var missing []string
		for _, p := range privs {
			var has bool
			if err := conn.QueryRow(ctx, `SELECT has_table_privilege($1, $2, $3)`, names.login, qualified, p).Scan(&has); err != nil {
				return fmt.Errorf("checking %s on %s: %w", p, qualified, err)
			}
			if !has {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			what := strings.Join(missing, ", ") + " on " + schema + "." + table
			if err := grant(what, "GRANT "+strings.Join(missing, ", ")+" ON "+qualified+" TO "+login); err != nil {
				return err
			}
		}
	}

	if err := ensureColumnGrants(ctx, conn, schema, names, grant); err != nil {
		return err
	}
	if err := ensureSearchPath(ctx, conn, schema, extSchema, names, res); err != nil {
		return err
	}
	if err := ensureNoPublicCreate(ctx, conn, names, res); err != nil {
		return err
	}
	if err := ensureNoTemp(ctx, conn, names, res); err != nil {
		return err
	}
	if err := ensureNoAdvisoryLocks(ctx, conn, names, res); err != nil {
		return err
	}
	return ensureReservedConnections(ctx, conn, res)
}

// ensureNoTemp makes sure the login role cannot create temporary tables:
// the service needs none, and a temp table is storage outside the tenant's
// schema (and its limits). PostgreSQL grants TEMPORARY on every database to
// PUBLIC and a grant to PUBLIC cannot be taken back from one role, so Engram
// revokes it from PUBLIC on its own database (docs/security.md says so, and
// how to grant it back to roles that need it).
func ensureNoTemp(ctx context.Context, conn *pgx.Conn, names roleNames, res *Result) error {
	var canTemp bool
	var db string
	if err := conn.QueryRow(ctx, `SELECT has_database_privilege($1, current_database(), 'TEMPORARY'), current_database()`,
		names.login).Scan(&canTemp, &db); err != nil {
		return fmt.Errorf("checking TEMPORARY on the database: %w", err)
	}
	if !canTemp {
		return nil
	}
	ident := pgx.Identifier{db}.Sanitize()
	for _, who := range []string{"PUBLIC", pgx.Identifier{names.login}.Sanitize()} {
		if _, err := conn.Exec(ctx, "REVOKE TEMPORARY ON DATABASE "+ident+" FROM "+who); err != nil {
			return fmt.Errorf("revoking TEMPORARY on database %s from %s: %w", db, who, err)
		}
	}
	res.Changes = append(res.Changes, "revoked TEMPORARY on database "+db+" from PUBLIC")
	return nil
}

// advisoryLockProcs selects the functions of pg_catalog that take an
// advisory lock, by name rather than from a hand-made list, so a server
// that adds a signature is covered too. The unlock functions take nothing
// and stay: connection poolers reset sessions with pg_advisory_unlock_all.
const advisoryLockProcs = ` FROM pg_proc p WHERE p.pronamespace = 'pg_catalog'::regnamespace
	AND p.proname LIKE 'pg\_%advisory%' AND p.proname NOT LIKE '%unlock%'`

// largeObjectCreateProcs are the functions of pg_catalog that create a
// large object. Large objects live in pg_largeobject, outside every
// schema, and PostgreSQL lets PUBLIC create them: a tenant could store any
// amount of data there, past its schema's quotas and the owner caps, where
// no retention job and no drop of its schema reaches. Engram stores none.
// The functions that read or write an existing large object stay: they
// need the object's own privileges, which only its owner has.
const largeObjectCreateProcs = `'lo_creat', 'lo_create', 'lo_from_bytea', 'lo_import'`

// revokedProcs selects every pg_catalog function whose EXECUTE Engram
// takes from PUBLIC in its database: the advisory-lock functions and the
// large-object creators.
const revokedProcs = ` FROM pg_proc p WHERE p.pronamespace = 'pg_catalog'::regnamespace
	AND ((p.proname LIKE 'pg\_%advisory%' AND p.proname NOT LIKE '%unlock%')
		OR p.proname IN (` + largeObjectCreateProcs + `))`

// ensureNoAdvisoryLocks makes sure the login role cannot take advisory
// locks. They live in the server's shared lock table, not in the tenant's
// schema, and a session keeps them until it ends: about 13,000 (the default
// max_locks_per_transaction × max_connections) fill the table, after which
// every other tenant's queries, the operator's and new provisioning fail
// with "out of shared memory" (issue 26's re-review). Engram's service,
// jobs and operator take none. As with TEMPORARY, the grant is PUBLIC's,
// so it is revoked from PUBLIC, in this database only (function privileges
// are per database), and on a Citus cluster on every worker too, where a
// tenant may log in directly.
//
// Only a superuser (or the functions' owner) may revoke it: PostgreSQL
// answers a restricted admin's REVOKE with a warning and changes nothing.
// Provisioning goes on then (a managed server may let no one do it) and
// res.Warnings says what a DBA must run.
//
// The large-object creators (largeObjectCreateProcs) are revoked the same
// way, in the same statement and the same warning: they are PUBLIC's too,
// and only a superuser may take them back.
func ensureNoAdvisoryLocks(ctx context.Context, conn *pgx.Conn, names roleNames, res *Result) error {
	citus, err := DetectCitus(ctx, conn)
	if err != nil {
		return err
	}
	if citus.Installed {
		if err := revokeAdvisoryOnWorkers(ctx, conn, names, res); err != nil {
			return err
		}
	}
	open, err := openAdvisoryFuncs(ctx, conn, names.login)
	if err != nil || len(open) == 0 {
		return err
	}
	stmt := "REVOKE EXECUTE ON FUNCTION " + strings.Join(open, ", ") + " FROM PUBLIC, " + pgx.Identifier{names.login}.Sanitize()
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("revoking the advisory-lock and large-object functions from PUBLIC: %w", err)
	}
	if open, err = openAdvisoryFuncs(ctx, conn, names.login); err != nil {
		return err
	}
	if len(open) > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("login role %s can take advisory locks, with which one tenant can fill "+
			"the server's lock table for all, or create large objects, stored outside its schema and quotas, and the admin "+
			"may not revoke them (only a superuser may): a superuser runs, "+
			"in this database, REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC (docs/security.md, \"What the DBA must do\")",
			names.login, strings.Join(open, ", ")))
		return nil
	}
	res.Changes = append(res.Changes, "revoked EXECUTE on the advisory-lock and large-object functions from PUBLIC")
	return nil
}

// openAdvisoryFuncs lists the functions of revokedProcs role may execute.
func openAdvisoryFuncs(ctx context.Context, conn *pgx.Conn, role string) ([]string, error) {
	var funcs []string
	err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(p.oid::regprocedure::text ORDER BY 1), '{}')`+revokedProcs+
		` AND has_function_privilege($1, p.oid, 'EXECUTE')`, role).Scan(&funcs)
	if err != nil {
		return nil, fmt.Errorf("checking the advisory-lock functions of %q: %w", role, err)
	}
	return funcs, nil
}

// revokeAdvisoryOnWorkers does ensureNoAdvisoryLocks's revoke on every
// Citus worker where the login role may still take an advisory lock:
// Citus does not propagate privileges on pg_catalog functions, and the
// cluster's admin is its superuser (docs/scale-out.md).
func revokeAdvisoryOnWorkers(ctx context.Context, conn *pgx.Conn, names roleNames, res *Result) error {
	check := `SELECT count(*)` + revokedProcs + ` AND has_function_privilege(` + quoteLiteral(names.login) + `, p.oid, 'EXECUTE')`
	open := func() ([]string, error) {
		rows, err := conn.Query(ctx, `SELECT nodename || ':' || nodeport || ': ' || result FROM run_command_on_workers($1)
			WHERE NOT success OR result <> '0' ORDER BY 1`, check)
		if err != nil {
			return nil, fmt.Errorf("checking the advisory-lock functions on the Citus workers: %w", err)
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	}
	nodes, err := open()
	if err != nil || len(nodes) == 0 {
		return err
	}
	revoke := `DO $revoke$ DECLARE f text; BEGIN FOR f IN SELECT p.oid::regprocedure::text` + revokedProcs + ` LOOP
		EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC, %I', f, ` + quoteLiteral(names.login) + `); END LOOP; END $revoke$`
	if _, err := conn.Exec(ctx, `SELECT run_command_on_workers($1)`, revoke); err != nil {
		return fmt.Errorf("revoking the advisory-lock functions on the Citus workers: %w", err)
	}
	if nodes, err = open(); err != nil {
		return err
	}
	if len(nodes) > 0 {
		var l lineLog // the list is the server's: its first lines name the problem
		for _, n := range nodes {
			l.add(n)
		}
		return fmt.Errorf("revoking the advisory-lock functions on the Citus workers: the login role may still take advisory locks on %s",
			strings.Join(l.into(nil, "workers"), "; "))
	}
	res.Changes = append(res.Changes, "revoked EXECUTE on the advisory-lock and large-object functions from PUBLIC on the Citus workers")
	return nil
}

// ensureSearchPath sets the login role's search_path to its schema and the
// schema of pgvector (for the vector type and its operators).
func ensureSearchPath(ctx context.Context, conn *pgx.Conn, schema, extSchema string, names roleNames, res *Result) error {
	var want string
	if err := conn.QueryRow(ctx, `SELECT format('%I, %I', $1::text, $2::text)`, schema, extSchema).Scan(&want); err != nil {
		return err
	}
	var config []string
	if err := conn.QueryRow(ctx, `SELECT coalesce(rolconfig, '{}') FROM pg_roles WHERE rolname = $1`, names.login).Scan(&config); err != nil {
		return fmt.Errorf("reading settings of %q: %w", names.login, err)
	}
	if slices.Contains(config, "search_path="+want) {
		return nil
	}
	stmt := "ALTER ROLE " + pgx.Identifier{names.login}.Sanitize() + " SET search_path = " +
		pgx.Identifier{schema}.Sanitize() + ", " + pgx.Identifier{extSchema}.Sanitize()
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("setting search_path of %q: %w", names.login, err)
	}
	res.Changes = append(res.Changes, "set search_path of "+names.login)
	return nil
}

// ensureNoPublicCreate makes sure the login role cannot create objects in the
// public schema. PostgreSQL 15+ already revokes that from PUBLIC; on older
// servers Engram applies the same revoke (documented in docs/operations.md).
func ensureNoPublicCreate(ctx context.Context, conn *pgx.Conn, names roleNames, res *Result) error {
	var canCreate bool
	err := conn.QueryRow(ctx, `SELECT coalesce((SELECT has_schema_privilege($1, 'public', 'CREATE')
		WHERE EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'public')), false)`, names.login).Scan(&canCreate)
	if err != nil {
		return fmt.Errorf("checking CREATE on schema public: %w", err)
	}
	if !canCreate {
		return nil
	}
	if _, err := conn.Exec(ctx, `REVOKE CREATE ON SCHEMA public FROM PUBLIC`); err != nil {
		return fmt.Errorf("revoking CREATE on schema public from PUBLIC: %w", err)
	}
	res.Changes = append(res.Changes, "revoked CREATE on schema public from PUBLIC")
	return nil
}

// ensureColumnGrants gives the login role its column privileges
// (columnGrants) where one is missing.
func ensureColumnGrants(ctx context.Context, conn *pgx.Conn, schema string, names roleNames, grant func(what, stmt string) error) error {
	for _, table := range slices.Sorted(maps.Keys(columnGrants)) {
		qualified := pgx.Identifier{schema, table}.Sanitize()
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, qualified).Scan(&exists); err != nil {
			return fmt.Errorf("looking for %s: %w", qualified, err)
		}
		if !exists {
			continue
		}
		for _, priv := range slices.Sorted(maps.Keys(columnGrants[table])) {
			cols := columnGrants[table][priv]
			var missing bool
			if err := conn.QueryRow(ctx, `SELECT NOT bool_and(has_column_privilege($1, $2, c, $3)) FROM unnest($4::text[]) AS c`,
				names.login, qualified, priv, cols).Scan(&missing); err != nil {
				return fmt.Errorf("checking %s on columns of %s: %w", priv, qualified, err)
			}
			if !missing {
				continue
			}
			idents := make([]string, len(cols))
			for i, c := range cols {
				idents[i] = pgx.Identifier{c}.Sanitize()
			}
			what := priv + " (" + strings.Join(cols, ", ") + ") on " + schema + "." + table
			if err := grant(what, "GRANT "+priv+" ("+strings.Join(idents, ", ")+") ON "+qualified+" TO "+pgx.Identifier{names.login}.Sanitize()); err != nil {
				return err
			}
		}
	}
	return nil
}
