package tenant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// moveEnv is a tenant provisioned on the shared server (the source) and a
// Relocation of it to a database of a second server.
type moveEnv struct {
	src, dst       *pgxpool.Pool
	srcURL, dstURL string
	spec           Spec
	res            *Result
	rel            Relocation
}

func newMoveEnv(t *testing.T, dims int) moveEnv {
	t.Helper()
	testenv.SkipOnCitus(t, "a move to another server refuses a Citus cluster on either side (ErrRelocateCitus: Citus moves schemas between its workers, docs/scale-out.md); these tests need a plain source")
	var e moveEnv
	e.src, e.srcURL = adminPool(t)
	in := testenv.NewInstance(t, "tenant-move")
	in.Start(t)
	e.dstURL = in.NewDatabase(t)
	e.dst = testenv.NewPool(t, e.dstURL, 4)
	e.spec = newSpec(uniqueSchema(t, "engram_mv"), dims)
	e.res = mustProvision(t, e.src, e.srcURL, e.spec)
	dropRolesAfter(t, e.dstURL, e.spec.Schema)
	e.rel = Relocation{Schema: e.spec.Schema, Owner: e.spec.Owner, Source: e.src, Target: e.dst, Provision: e.spec}
	return e
}

// newCopiedMove is a moveEnv (vectors of 4 dimensions) whose tenant holds
// rows memories (fillTenant), prepared and copied to the target.
func newCopiedMove(t *testing.T, rows int) moveEnv {
	t.Helper()
	e := newMoveEnv(t, 4)
	ctx := testCtx(t)
	fillTenant(t, e.src, e.spec.Schema, 4, rows)
	if err := e.rel.Prepare(ctx); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	copyAll(t, ctx, e.rel)
	return e
}

func mustExec(t *testing.T, p *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := p.Exec(testCtx(t), sql); err != nil {
		t.Fatalf("%s: %v", firstLine(sql), err)
	}
}

func scalar[T any](t *testing.T, p *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	if err := p.QueryRow(testCtx(t), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", firstLine(sql), err)
	}
	return v
}

// fillTenant writes n memories with vectors (some superseding others) and
// their history, a session with messages, a summary DAG, an episode, a
// document and its changes, through SQL as the admin.
func fillTenant(t *testing.T, p *pgxpool.Pool, s string, dims, n int) {
	t.Helper()
	vec := fmt.Sprintf("(SELECT array_agg(random()::real) FROM generate_series(1, %d) WHERE g.i > 0)::vector", dims)
	mustExec(t, p, strings.NewReplacer("S.", s+".", "VEC", vec, "NROWS", fmt.Sprint(n)).Replace(`
		INSERT INTO S.memories (id, owner_id, source, category, content, embedding, tags, metadata)
			SELECT gen_random_uuid(), 'o' || g.i % 3, 'user', 'fact', 'fact number ' || g.i, VEC, ARRAY['t' || g.i % 2], jsonb_build_object('n', g.i)
			FROM generate_series(1, NROWS) AS g(i);
		UPDATE S.memories m SET superseded_by = (SELECT id FROM S.memories x WHERE x.id > m.id ORDER BY x.id LIMIT 1), active = false, deactivated_at = now()
			WHERE m.id IN (SELECT id FROM S.memories ORDER BY content LIMIT 5);
		INSERT INTO S.memory_history (memory_id, owner_id, action, actor, new_content) SELECT id, owner_id, 'add', 'user', content FROM S.memories;
		INSERT INTO S.sessions (owner_id, id, message_count, next_seq) VALUES ('o1', 'chat', 3, 4);
		INSERT INTO S.messages (owner_id, session_id, seq, role, content, tokens, embedding)
			SELECT 'o1', 'chat', g.i, 'user', 'hello ' || g.i, 2, VEC FROM generate_series(1, 3) AS g(i);
		INSERT INTO S.summaries (id, owner_id, session_id, depth, content, earliest_seq, latest_seq, earliest_at, latest_at, tokens, descendant_count, method, embedding)
			SELECT ('00000000-0000-0000-0000-00000000000' || g.i)::uuid, 'o1', 'chat', g.i - 1, 'summary ' || g.i, 1, 3, now(), now(), 5, g.i, 'llm', VEC
			FROM generate_series(1, 2) AS g(i);
		INSERT INTO S.summary_sources (summary_id, ord, child_id, from_seq, to_seq) VALUES
			('00000000-0000-0000-0000-000000000001', 1, NULL, 1, 4), ('00000000-0000-0000-0000-000000000002', 1, '00000000-0000-0000-0000-000000000001', NULL, NULL);
		INSERT INTO S.episodes (id, owner_id, session_id, summary, method, user_turns, started_at, ended_at, embedding)
			SELECT gen_random_uuid(), 'o1', 'chat', 'an episode', 'llm', 3, now(), now(), VEC FROM generate_series(1, 1) AS g(i);
		INSERT INTO S.documents (owner_id, kind, version, content, source) VALUES ('o1', 'profile', 2, 'likes tea', 'user');
		INSERT INTO S.document_changes (owner_id, kind, version, source, before, after) VALUES
			('o1', 'profile', 1, 'user', '', 'likes coffee'), ('o1', 'profile', 2, 'user', 'likes coffee', 'likes tea');`))
}

// copyAll calls Copy until it is done and returns the calls it took.
func copyAll(t *testing.T, ctx context.Context, rel Relocation) (int, RelocateProgress) {
	t.Helper()
	for calls := 1; calls <= 1000; calls++ {
		done, p, err := rel.Copy(ctx)
		if err != nil {
			t.Fatalf("Copy (call %d): %v", calls, err)
		}
		if done {
			return calls, p
		}
	}
	t.Fatal("Copy is not done after 1000 calls")
	return 0, RelocateProgress{}
}

func schemaComment(t *testing.T, p *pgxpool.Pool, schema string) string {
	t.Helper()
	return scalar[string](t, p, "SELECT coalesce(obj_description(oid, 'pg_namespace'), '') FROM pg_namespace WHERE nspname = $1", schema)
}

// loginWrite reads and then writes as the login role on a new session and
// returns the SQLSTATE of the write's error ("" when it wrote); the read
// must work.
func loginWrite(t *testing.T, e moveEnv) string {
	t.Helper()
	conn := loginConn(t, e.srcURL, e.res, e.res.Password)
	var n int64
	if err := conn.QueryRow(testCtx(t), "SELECT count(*) FROM memories").Scan(&n); err != nil || n == 0 {
		t.Fatalf("login read: %d rows, %v", n, err)
	}
	_, err := conn.Exec(testCtx(t), "INSERT INTO owner_locks (owner_id) VALUES ($1) ON CONFLICT DO NOTHING", fmt.Sprint(time.Now().UnixNano()))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	if err != nil {
		t.Fatalf("login write: %v", err)
	}
	return ""
}

// loginGrants lists the login role's table and column privileges and its
// settings in the source database.
func loginGrants(t *testing.T, e moveEnv) string {
	t.Helper()
	return scalar[string](t, e.src, `SELECT concat_ws(' | ',
		(SELECT string_agg(table_name || ':' || privilege_type, ',' ORDER BY table_name || ':' || privilege_type) FROM information_schema.role_table_grants
			WHERE grantee = $1 AND table_schema = $2),
		(SELECT string_agg(column_name || ':' || privilege_type, ',' ORDER BY column_name || ':' || privilege_type) FROM information_schema.column_privileges
			WHERE grantee = $1 AND table_schema = $2 AND table_name = 'reembed' AND privilege_type <> 'SELECT'),
		(SELECT string_agg(array_to_string(setconfig, ','), ';') FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
			WHERE r.rolname = $1 AND s.setdatabase <> 0))`, e.res.LoginRole, e.spec.Schema)
}

// TestRelocate moves a tenant with writes between the catch-up passes:
// the copy equals the source (Verify), the source is frozen (writes
// 25006, reads work, Provision leaves it frozen), the target becomes the
// home with its identities past the copied ids, the source is marked moved
// and no longer a home, and DropMoved drops it.
func TestRelocate(t *testing.T) {
	e := newMoveEnv(t, 8)
	ctx, s := testCtx(t), e.spec.Schema
	fillTenant(t, e.src, s, 8, 300)
	rel := e.rel
	rel.ChunkRows = 70 // several chunks per table

	if err := rel.Prepare(ctx); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if err := rel.Prepare(ctx); err != nil {
		t.Fatalf("Prepare again: %v", err)
	}
	if c := schemaComment(t, e.dst, s); !strings.Contains(c, "uid="+e.spec.Owner.UID+"+incoming;") {
		t.Fatalf("target marker %q; want the incoming one", c)
	}
	if home, err := HoldsTenant(ctx, e.dst, s, e.spec.Owner, Claim{}); err != nil || home {
		t.Fatalf("HoldsTenant(incoming target) = %v, %v; want false", home, err)
	}
	if _, err := rel.CatchUp(ctx); !errors.Is(err, ErrRelocateNotCopied) {
		t.Fatalf("CatchUp before the copy: %v; want ErrRelocateNotCopied", err)
	}
	_, p := copyAll(t, ctx, rel)
	if p.CopiedRows != p.TotalRows || p.TotalRows < 600 {
		t.Fatalf("progress %+v; want every row copied", p)
	}
	if got, want := scalar[int64](t, e.dst, "SELECT count(*) FROM pg_indexes WHERE schemaname = $1", s),
		scalar[int64](t, e.src, "SELECT count(*) FROM pg_indexes WHERE schemaname = $1", s); got != want {
		t.Fatalf("target has %d indexes after the copy, source %d", got, want)
	}

	// Writes between the passes: inserts, updates, deletes (cascading ones
	// included), in several tables.
	mustExec(t, e.src, strings.NewReplacer("S.", s+".").Replace(`
		INSERT INTO S.memories (id, owner_id, source, category, content, embedding)
			SELECT gen_random_uuid(), 'o9', 'agent', 'fact', 'late ' || g.i, (SELECT embedding FROM S.memories LIMIT 1) FROM generate_series(1, 40) g(i);
		UPDATE S.memories SET content = content || ' (edited)', updated_at = now() WHERE owner_id = 'o1';
		DELETE FROM S.memories WHERE id IN (SELECT id FROM S.memories WHERE owner_id = 'o2' ORDER BY id LIMIT 30);
		INSERT INTO S.memory_history (memory_id, owner_id, action, actor) SELECT id, owner_id, 'update', 'user' FROM S.memories WHERE owner_id = 'o1';
		INSERT INTO S.messages (owner_id, session_id, seq, role, content, tokens) VALUES ('o1', 'chat', 4, 'assistant', 'hi', 1);
		UPDATE S.sessions SET message_count = 4, next_seq = 5;
		DELETE FROM S.documents;`))
	d1, err := rel.CatchUp(ctx)
	if err != nil || d1 < 100 {
		t.Fatalf("CatchUp 1: %d rows, %v; want the writes applied", d1, err)
	}
	mustExec(t, e.src, strings.NewReplacer("S.", s+".").Replace(`
		DELETE FROM S.summaries WHERE id = '00000000-0000-0000-0000-000000000001';
		UPDATE S.memories SET access_count = access_count + 1 WHERE owner_id = 'o0';`))
	if d2, err := rel.CatchUp(ctx); err != nil || d2 == 0 {
		t.Fatalf("CatchUp 2: %d rows, %v; want the writes applied", d2, err)
	}
	if d3, err := rel.CatchUp(ctx); err != nil || d3 != 0 {
		t.Fatalf("CatchUp 3 without writes: %d rows, %v; want none", d3, err)
	}

	if err := rel.Freeze(ctx); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	if err := rel.Freeze(ctx); err != nil {
		t.Fatalf("Freeze again: %v", err)
	}
	if code := loginWrite(t, e); code != "25006" {
		t.Fatalf("a login write on the frozen source: SQLSTATE %q; want 25006", code)
	}
	if _, err := Provision(ctx, e.src, e.spec); err != nil {
		t.Fatalf("Provision of the frozen source: %v", err)
	}
	if scalar[bool](t, e.src, "SELECT has_table_privilege($1, $2, 'INSERT')", e.res.LoginRole, s+".memories") {
		t.Fatal("Provision gave the frozen login role INSERT back")
	}
	// The admin may still write (a stray job): the last pass picks it up,
	// and Verify catches a difference until it has.
	mustExec(t, e.src, "UPDATE "+s+".memories SET importance = 9 WHERE owner_id = 'o0'")
	if _, err := rel.Verify(ctx); !errors.Is(err, ErrRelocateMismatch) || !strings.Contains(err.Error(), "memories") {
		t.Fatalf("Verify with a write not caught up: %v; want ErrRelocateMismatch naming memories", err)
	}
	if _, err := rel.CatchUp(ctx); err != nil {
		t.Fatalf("final CatchUp: %v", err)
	}
	check, err := rel.Verify(ctx)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if want := scalar[int64](t, e.src, "SELECT (SELECT count(*) FROM "+s+".memories) + (SELECT count(*) FROM "+s+".memory_history)"); check.Rows <= want || check.Tables < 15 || len(check.Checksum) != 16 {
		t.Fatalf("Verify = %+v; want every table's rows (more than %d)", check, want)
	}

	maxHist := scalar[int64](t, e.dst, "SELECT max(id) FROM "+s+".memory_history")
	if err := rel.Finish(ctx); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if err := rel.Finish(ctx); err != nil {
		t.Fatalf("Finish again: %v", err)
	}
	if c := schemaComment(t, e.dst, s); c != e.spec.Owner.marker() {
		t.Fatalf("target marker after Finish %q; want %q", c, e.spec.Owner.marker())
	}
	if id := scalar[int64](t, e.dst, "INSERT INTO "+s+".memory_history (memory_id, owner_id, action, actor) VALUES (gen_random_uuid(), 'o1', 'add', 'user') RETURNING id"); id <= maxHist {
		t.Fatalf("a new history row got id %d; want past the copied %d", id, maxHist)
	}
	q := "SELECT count(*) FROM pg_constraint WHERE connamespace = $1::regnamespace"
	if got, want := scalar[int64](t, e.dst, q, s), scalar[int64](t, e.src, q, s); got != want {
		t.Fatalf("target has %d constraints, source %d", got, want)
	}
	if home, err := HoldsTenant(ctx, e.dst, s, e.spec.Owner, Claim{}); err != nil || !home {
		t.Fatalf("HoldsTenant(target after Finish) = %v, %v; want true", home, err)
	}

	if err := rel.MarkMoved(ctx, ServerIdentity{System: "42", Database: "x;y=z", DatabaseOID: 7}); err != nil {
		t.Fatalf("MarkMoved: %v", err)
	}
	if home, err := HoldsTenant(ctx, e.src, s, e.spec.Owner, Claim{}); err != nil || home {
		t.Fatalf("HoldsTenant(moved source) = %v, %v; want false", home, err)
	}
	if _, err := Provision(ctx, e.src, e.spec); !errors.Is(err, ErrOwnedByOther) {
		t.Fatalf("Provision of the moved source: %v; want ErrOwnedByOther", err)
	}
	if frozen, err := rel.Frozen(ctx); err != nil || !frozen {
		t.Fatalf("Frozen(moved source) = %v, %v; want true", frozen, err)
	}
	if err := rel.Unfreeze(ctx); err == nil {
		t.Fatal("Unfreeze of a moved source worked; want it refused")
	}
	if _, err := Drop(ctx, e.src, s, e.spec.Owner); !errors.Is(err, ErrOwnedByOther) {
		t.Fatalf("Drop of the moved copy: %v; want ErrOwnedByOther (DropMoved drops it)", err)
	}
	if err := rel.DropMoved(ctx); err != nil {
		t.Fatalf("DropMoved: %v", err)
	}
	if scalar[bool](t, e.src, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) OR EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $2)", s, e.res.LoginRole) {
		t.Fatal("the moved copy or its login role is still on the source")
	}
	if err := rel.DropMoved(ctx); err != nil {
		t.Fatalf("DropMoved again: %v", err)
	}
}
