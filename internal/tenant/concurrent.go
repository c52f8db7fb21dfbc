package tenant

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultIndexTimeout bounds one CREATE INDEX CONCURRENTLY of a migration:
// longer than the admin session's statement_timeout, since building an
// index on a large tenant legitimately takes minutes.
const DefaultIndexTimeout = 30 * time.Minute

// concurrentIndex finds the index a statement builds concurrently.
var concurrentIndex = regexp.MustCompile(`(?is)^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY\s+IF\s+NOT\s+EXISTS\s+("?[a-z_][a-z0-9_]*"?)\s+ON\s`)

// concurrentDrop finds a statement that drops an index concurrently: like a
// build, it waits for every transaction using the table to end.
var concurrentDrop = regexp.MustCompile(`(?is)^\s*DROP\s+INDEX\s+CONCURRENTLY\s`)

// migrateConcurrent runs the statements of a concurrent migration one by
// one, outside a transaction, as the owner role; index builds and
// concurrent drops get indexTimeout as their statement timeout and
// lockTimeout as their lock timeout: a concurrent build waits, as a lock,
// for every older snapshot of the database, and the session's short lock
// timeout would fail it before the blocker watcher could end another
// tenant's snapshot (BlockerPolicy.lockTimeout; such a build blocks no
// writer meanwhile, unlike DDL queued for a strong lock). Before
// each CREATE INDEX CONCURRENTLY it drops an invalid index of the same
// name: a build that was interrupted (operator killed, timeout, cancelled)
// leaves an INVALID index behind, which IF NOT EXISTS would keep forever and the planner never uses.
func migrateConcurrent(ctx context.Context, conn *pgx.Conn, owner, schema, sql string, indexTimeout, lockTimeout time.Duration) (err error) {
	if indexTimeout <= 0 {
		indexTimeout = DefaultIndexTimeout
	}
	if _, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{owner}.Sanitize()); err != nil {
		return fmt.Errorf("SET ROLE %s: %w", owner, err)
	}
	defer func() {
		// A fresh context: the session goes back to the pool as the admin,
		// with the pool's statement_timeout, even when ctx is done.
		if _, rerr := conn.Exec(context.Background(), "RESET ROLE; RESET statement_timeout; RESET lock_timeout"); rerr != nil {
			_ = conn.Close(context.Background())
			err = errors.Join(err, fmt.Errorf("resetting the session after a concurrent migration: %w", rerr))
		}
	}()
	for _, stmt := range splitStatements(sql) {
		timeout := ""
		if m := concurrentIndex.FindStringSubmatch(stmt); m != nil {
			if err := dropInvalidIndex(ctx, conn, schema, strings.Trim(m[1], `"`)); err != nil {
				return err
			}
			timeout = fmt.Sprintf("SET statement_timeout = %d; SET lock_timeout = %d", indexTimeout.Milliseconds(), lockTimeout.Milliseconds())
		} else if concurrentDrop.MatchString(stmt) {
			timeout = fmt.Sprintf("SET statement_timeout = %d; SET lock_timeout = %d", indexTimeout.Milliseconds(), lockTimeout.Milliseconds())
		} else {
			timeout = "RESET statement_timeout; RESET lock_timeout"
		}
		if _, err := conn.Exec(ctx, timeout); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", firstLine(stmt), err)
		}
	}
	return nil
}

// dropInvalidIndex drops schema.name when it exists and is not valid.
func dropInvalidIndex(ctx context.Context, conn *pgx.Conn, schema, name string) error {
	var invalid bool
	err := conn.QueryRow(ctx, `SELECT NOT i.indisvalid FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2`, schema, name).Scan(&invalid)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !invalid) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking index %s.%s: %w", schema, name, err)
	}
	if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+pgx.Identifier{schema, name}.Sanitize()); err != nil {
		return fmt.Errorf("dropping the invalid index %s.%s left by an interrupted build: %w", schema, name, err)
	}
	return nil
}

// splitStatements splits a migration at semicolons that end a line, before
// a trailing "--" comment if any, outside dollar-quoted bodies (a function's
// body ends its statements with semicolons too). Our migrations put no
// semicolon at a line's end inside a literal, no "--" inside a literal, and
// open and close a body's dollar quote on lines of their own statement.
func splitStatements(sql string) []string {
	var out []string
	var cur strings.Builder
	inBody := false
	for line := range strings.SplitSeq(sql, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || !inBody && strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		code, _, _ := strings.Cut(trimmed, "--")
		if len(dollarQuote.FindAllString(code, -1))%2 == 1 {
			inBody = !inBody
		}
		if !inBody && strings.HasSuffix(strings.TrimSpace(code), ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// dollarQuote matches a dollar-quote tag ($$, $fn$), not a parameter ($1).
var dollarQuote = regexp.MustCompile(`\$[A-Za-z_]*\$`)

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
