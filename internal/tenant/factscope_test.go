package tenant

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestFactOwnerScopeMigrationMovesExtractedFacts upgrades a schema whose
// session extractions stored facts under the session: those facts (the
// session's own id and agent, a session extracted from, written after it
// began) become the owner's with the session as source_session, and the
// move is in their history; every other memory keeps its scope.
func TestFactOwnerScopeMigrationMovesExtractedFacts(t *testing.T) {
	pool, url := adminPool(t)
	ctx := testCtx(t)
	spec := provisionedBefore(t, pool, url, "0013_fact_owner_scope", "engram_factscope")
	sessions, memories := pgx.Identifier{spec.Schema, "sessions"}.Sanitize(), pgx.Identifier{spec.Schema, "memories"}.Sanitize()
	history := pgx.Identifier{spec.Schema, "memory_history"}.Sanitize()
	if _, err := pool.Exec(ctx, `INSERT INTO `+sessions+` (owner_id, id, agent_id, extracted_through, created_at) VALUES
		('alice', 'trip', 'helper', 4, now() - interval '1 hour'),
		('alice', 'fresh', 'helper', 0, now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	rows := []struct{ id, owner, agent, session, age, want string }{
		{"00000000-0000-7000-8000-000000000001", "alice", "helper", "trip", "10 minutes", ""},       // an extracted fact
		{"00000000-0000-7000-8000-000000000002", "alice", "helper", "fresh", "10 minutes", "fresh"}, // a session never extracted from
		{"00000000-0000-7000-8000-000000000003", "alice", "other", "trip", "10 minutes", "trip"},    // another agent's
		{"00000000-0000-7000-8000-000000000004", "alice", "helper", "trip", "2 hours", "trip"},      // older than the session
		{"00000000-0000-7000-8000-000000000005", "bob", "helper", "trip", "10 minutes", "trip"},     // another owner's session id
		{"00000000-0000-7000-8000-000000000006", "alice", "helper", "", "10 minutes", ""},           // owner-wide already
	}
	for _, r := range rows {
		if _, err := pool.Exec(ctx, `INSERT INTO `+memories+` (id, owner_id, agent_id, session_id, source, category, content, embedding, created_at)
			VALUES ($1, $2, $3, $4, 'user', 'preference', $6, '[1,0,0,0,0,0,0,0]', now() - $5::interval)`,
			r.id, r.owner, r.agent, r.session, r.age, "fact "+r.id); err != nil {
			t.Fatal(err)
		}
	}

	if up, err := Provision(ctx, pool, spec); err != nil || up.Version != LatestVersion {
		t.Fatalf("upgrading: %+v, %v", up, err)
	}
	for _, r := range rows {
		var session, source string
		if err := pool.QueryRow(ctx, `SELECT session_id, source_session FROM `+memories+` WHERE id = $1`, r.id).Scan(&session, &source); err != nil {
			t.Fatal(err)
		}
		wantSource := ""
		if r.want != r.session {
			wantSource = r.session
		}
		if session != r.want || source != wantSource {
			t.Errorf("memory %s (%s/%s in %q): session %q source_session %q, want %q and %q", r.id, r.owner, r.agent, r.session, session, source, r.want, wantSource)
		}
	}
	var moved int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+history+` WHERE action = 'rescope' AND actor = 'system'
		AND memory_id = $1 AND details->>'sourceSession' = 'trip'`, rows[0].id).Scan(&moved); err != nil || moved != 1 {
		t.Fatalf("history of the moved fact: %d rescope rows, %v; want 1", moved, err)
	}
	var others int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+history+` WHERE memory_id <> $1`, rows[0].id).Scan(&others); err != nil || others != 0 {
		t.Fatalf("%d history rows for memories that were not moved, %v", others, err)
	}
}
