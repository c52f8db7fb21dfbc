package tenant

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationVersion is the version of the migration named name (its file
// name without .sql), so a test does not hard-code a number that merging
// other branches' migrations may change.
func migrationVersion(t *testing.T, name string) int {
	t.Helper()
	for _, m := range migrations {
		if m.Name == name {
			return m.Version
		}
	}
	t.Fatalf("no migration named %s", name)
	return 0
}

// provisionedBefore provisions a tenant of a fresh schema named after base
// to the version before migration (8 dimensions) and returns its spec:
// the schema a test of that migration upgrades.
func provisionedBefore(t *testing.T, pool *pgxpool.Pool, url, migration, base string) Spec {
	t.Helper()
	v := migrationVersion(t, migration)
	spec := newSpec(uniqueSchema(t, base), 8)
	dropRolesAfter(t, url, spec.Schema)
	if old, err := provisionTo(testCtx(t), pool, spec, v-1); err != nil || old.Version != v-1 {
		t.Fatalf("provisioning to version %d: %+v, %v", v-1, old, err)
	}
	return spec
}

// TestMessageSourceMigrationMarksOldMessagesAgent upgrades a schema whose
// messages were stored before sources were recorded: they read agent (who
// appended them is unknown, so the least trusted source a caller may
// assert), new rows take the sources of memories and nothing else.
func TestMessageSourceMigrationMarksOldMessagesAgent(t *testing.T) {
	pool, url := adminPool(t)
	ctx := testCtx(t)
	spec := provisionedBefore(t, pool, url, "0011_message_source", "engram_msgsrc")
	sessions, messages := pgx.Identifier{spec.Schema, "sessions"}.Sanitize(), pgx.Identifier{spec.Schema, "messages"}.Sanitize()
	if _, err := pool.Exec(ctx, `INSERT INTO `+sessions+` (owner_id, id, message_count, next_seq) VALUES ('alice', 's', 3, 4)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+messages+` (owner_id, session_id, seq, role, content, tokens)
		VALUES ('alice', 's', 1, 'user', 'I live in Porto', 4), ('alice', 's', 2, 'assistant', 'Noted', 1), ('alice', 's', 3, 'system', 'Be brief', 2)`); err != nil {
		t.Fatal(err)
	}

	upgraded, err := Provision(ctx, pool, spec)
	if err != nil || upgraded.Version != LatestVersion {
		t.Fatalf("upgrading: %+v, %v", upgraded, err)
	}
	rows, err := pool.Query(ctx, `SELECT source FROM `+messages+` ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(got) != 3 || got[0] != "agent" || got[1] != "agent" || got[2] != "agent" {
		t.Fatalf("sources after the upgrade %v, %v; want agent for every old message", got, err)
	}

	for i, src := range []string{"user", "agent", "system", "job"} {
		if _, err := pool.Exec(ctx, `INSERT INTO `+messages+` (owner_id, session_id, seq, role, content, tokens, source)
			VALUES ('alice', 's', $2, 'user', 'x', 1, $1)`, src, 10+i); err != nil {
			t.Fatalf("a message with source %s: %v", src, err)
		}
	}
	_, err = pool.Exec(ctx, `INSERT INTO `+messages+` (owner_id, session_id, seq, role, content, tokens, source)
		VALUES ('alice', 's', 99, 'user', 'x', 1, 'admin')`)
	var pgErr *pgconn.PgError
	// On Citus the error comes from the worker, about the shard's copy of
	// the constraint (messages_source_102015), named in the message only.
	if !errors.As(err, &pgErr) || pgErr.Code != "23514" ||
		!strings.HasPrefix(pgErr.ConstraintName, "messages_source") && !strings.Contains(pgErr.Message, `constraint "messages_source`) {
		t.Fatalf("a message with source admin: %v, want a violation of messages_source", err)
	}
}
