package memory

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// seedCopyTimeout bounds a test's bulk load: far above what it needs on
// a quiet machine (a few seconds for 200k rows), so a busy one (the whole
// make test on 2 cores) does not hit the service's own statement_timeout,
// which bounds requests, not fixtures.
const seedCopyTimeout = "10min"

// copyMemories loads rows (id, owner_id, source, category, content,
// embedding) into the fixture's memories with COPY, as the tenant's role,
// in one transaction whose statement_timeout is seedCopyTimeout.
func (f *fixture) copyMemories(t *testing.T, rows [][]any) {
	t.Helper()
	tx, err := f.store.core.Pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx(t)) }()
	if _, err := tx.Exec(ctx(t), "SET LOCAL statement_timeout = '"+seedCopyTimeout+"'"); err != nil {
		t.Fatal(err)
	}
	n, err := tx.CopyFrom(ctx(t), pgx.Identifier{f.store.core.Schema, "memories"},
		[]string{"id", "owner_id", "source", "category", "content", "embedding"}, pgx.CopyFromRows(rows))
	if err != nil || n != int64(len(rows)) {
		t.Fatalf("COPY: %d rows, %v", n, err)
	}
	if err := tx.Commit(ctx(t)); err != nil {
		t.Fatalf("committing the COPY: %v", err)
	}
}
