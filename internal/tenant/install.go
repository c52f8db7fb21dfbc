package tenant

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// installFresh brings a schema that has no migration applied yet to
// version target in one transaction, with one round trip for all of its
// DDL: the rendered migrations 1..target and the rows of schema_migrations
// that say they were applied, sent as one simple-protocol query (four
// round trips in all with BEGIN, SET LOCAL ROLE and COMMIT). Replaying the
// migrations one by one cost a transaction per migration and a round trip
// per statement, and each CREATE INDEX CONCURRENTLY waited for every
// transaction older than it in the whole database — other tenants'
// provisionings included — although the table it indexed was empty
// (docs/performance.md, "Operator: why Ready came in one jump").
//
// The migrations are the same files either way, so the two cannot drift:
// a concurrent migration's CREATE/DROP INDEX CONCURRENTLY runs here as
// plain CREATE/DROP INDEX, which leaves the same catalog (the tables are
// created in this very transaction, nobody else can see them, so there is
// no writer to keep going). TestFreshInstallEqualsReplay compares the
// catalogs of a schema installed here and one replayed migration by
// migration. A Citus coordinator keeps the replay: Citus forwards some
// DDL to the worker with its whole query string, which must then hold a
// single command.
//
// A failure rolls the whole transaction back: the schema stays at version
// 0 and the next pass starts over, as a replay interrupted in migration 1
// would.
func installFresh(ctx context.Context, conn *pgx.Conn, owner, table, createTable string, vars migrationVars, target int) ([]int, error) {
	script, applied, err := freshScript(table, createTable, vars, target)
	if err != nil {
		return nil, err
	}
	err = inTx(ctx, conn, owner, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, script) // no arguments: the simple protocol, one round trip
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("installing schema %s at version %d: %w", vars.Schema, target, err)
	}
	return applied, nil
}

// freshScript renders migrations 1..target into one script that creates
// the migrations table, runs every statement (concurrent index builds and
// drops as plain ones) and records each version, and returns the versions.
func freshScript(table, createTable string, vars migrationVars, target int) (string, []int, error) {
	var script strings.Builder
	script.WriteString(createTable + ";\n")
	var applied []int
	var rows []string
	for _, m := range migrations {
		if m.Version > target {
			break
		}
		var sql bytes.Buffer
		if err := m.sql.Execute(&sql, vars); err != nil {
			return "", nil, fmt.Errorf("rendering migration %s: %w", m.Name, err)
		}
		for _, stmt := range splitStatements(sql.String()) {
			if m.Concurrent {
				stmt = notConcurrently.ReplaceAllString(stmt, "$1")
			}
			script.WriteString(strings.TrimSuffix(stmt, ";") + ";\n")
		}
		applied = append(applied, m.Version)
		rows = append(rows, "("+strconv.Itoa(m.Version)+", "+quoteLiteral(m.Name)+")")
	}
	if len(rows) > 0 {
		script.WriteString("INSERT INTO " + table + " (version, name) VALUES " + strings.Join(rows, ", ") + ";\n")
	}
	return script.String(), applied, nil
}

// notConcurrently finds the CONCURRENTLY of a CREATE [UNIQUE] INDEX or a
// DROP INDEX statement (the only statements a concurrent migration may
// hold besides idempotent DDL; see Migration.Concurrent).
var notConcurrently = regexp.MustCompile(`(?is)^(\s*(?:CREATE\s+(?:UNIQUE\s+)?|DROP\s+)INDEX)\s+CONCURRENTLY\b`)
