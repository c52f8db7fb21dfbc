package tenant

import (
	"context"
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
