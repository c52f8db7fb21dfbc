package tenant

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestControlSchemaCreatedConcurrently: the first passes of an operator on
// a fresh server all create the control schema at once; concurrent REVOKE
// or COMMENT on the new schema failed one of them with "tuple concurrently
// updated" (seen in make test). Eight sessions on each of five fresh
// databases: every one succeeds.
func TestControlSchemaCreatedConcurrently(t *testing.T) {
	const rounds, sessions = 5, 8
	for range rounds {
		url := testenv.NewDatabase(t)
		conns := make([]*pgx.Conn, sessions)
		for i := range conns {
			c, err := pgx.Connect(testCtx(t), url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close(context.Background()) })
			conns[i] = c
		}
		var wg sync.WaitGroup
		errs := make(chan error, sessions)
		for _, c := range conns {
			wg.Go(func() { errs <- ensureControlSchema(testCtx(t), c) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("one of %d concurrent creations of the control schema: %v", sessions, err)
			}
		}
	}
}

// TestControlSchemaTakesNoLockATenantCanHold (issue 26's seventh review,
// MEDIUM 1): the control schema's creation took an advisory lock with a
// fixed key; any role with CONNECT to a fresh database (a tenant's login
// role, by default) could hold that key and stall every first
// provisioning of the database. A session holding the old key, or any
// advisory lock, does not stop it now.
func TestControlSchemaTakesNoLockATenantCanHold(t *testing.T) {
	url := testenv.NewDatabase(t)
	holder, err := pgx.Connect(testCtx(t), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	const oldKey = 0x656e6772616d // the key of the advisory lock it used to take
	if _, err := holder.Exec(testCtx(t), "SELECT pg_advisory_lock($1)", int64(oldKey)); err != nil {
		t.Fatal(err)
	}
	cfg := mustParseConfig(t, url)
	cfg.RuntimeParams["lock_timeout"] = "2s" // as the operator's sessions have one
	conn, err := pgx.ConnectConfig(testCtx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if err := ensureControlSchema(testCtx(t), conn); err != nil {
		t.Fatalf("creating the control schema while a session holds an advisory lock: %v", err)
	}
}

// TestControlSchemaLostRacesAreAnError (issue 26's eighth review, L2): a
// pass that lost the race to create the control schema every time
// reported success, and the next statement failed with a misleading
// "relation does not exist". An event trigger makes every CREATE SCHEMA
// of the database fail as a lost race does (42P06): the creation now says
// it lost the race, and how often.
func TestControlSchemaLostRacesAreAnError(t *testing.T) {
	url := testenv.NewDatabase(t)
	conn, err := pgx.Connect(testCtx(t), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, stmt := range []string{
		`CREATE FUNCTION public.lose_the_race() RETURNS event_trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION USING ERRCODE = '42P06', MESSAGE = 'another pass created the schema (test)'; END $$`,
		`CREATE EVENT TRIGGER lose_the_race ON ddl_command_start WHEN TAG IN ('CREATE SCHEMA') EXECUTE FUNCTION public.lose_the_race()`,
	} {
		if _, err := conn.Exec(testCtx(t), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	err = ensureControlSchema(testCtx(t), conn)
	if err == nil || !strings.Contains(err.Error(), "lost the race to create it 5 times") {
		t.Fatalf("creating the control schema where every creation loses the race: %v, want an error saying it lost the race 5 times", err)
	}
}
