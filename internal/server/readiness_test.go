package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestReadyzCache: /readyz answers from its last database check for about
// a second: a change of the database is not seen within that window, and
// is seen (failure, then recovery) soon after.
func TestReadyzCache(t *testing.T) {
	const readyWindows = 5 * time.Second // five cache windows
	tn, srv := newServedTenant(t)
	ready := func() *response { return srv.do(t, req{method: "GET", path: "/readyz", noAuth: true}) }
	// A migration this binary does not know makes the schema "not at this
	// binary's version": a real change of what the check reads.
	exec := func(sql string) {
		t.Helper()
		if _, err := tn.admin.Exec(testCtx(t), fmt.Sprintf(sql, tn.schema)); err != nil {
			t.Fatal(err)
		}
	}
	const breakSQL, fixSQL = `INSERT INTO %s.schema_migrations (version, name) VALUES (999, 'from the future')`, `DELETE FROM %s.schema_migrations WHERE version = 999`

	cached := false
	for attempt := 0; attempt < 3 && !cached; attempt++ {
		time.Sleep(readyCacheTTL) // let any earlier outcome expire
		start := time.Now()
		ready().want(t, 200) // a fresh check, cached from now on
		exec(breakSQL)
		sent := time.Now()
		r := ready()
		exec(fixSQL)
		if sent.Sub(start) >= readyCacheTTL {
			continue // this machine was too slow to ask within the window; again
		}
		if r.status != 200 {
			t.Fatalf("within %s of a check, /readyz checked again: %d %s", readyCacheTTL, r.status, r.body)
		}
		cached = true
	}
	if !cached {
		t.Fatal("could not ask twice within the cache window in 3 attempts")
	}

	exec(breakSQL)
	testenv.EventuallyTrue(t, "/readyz sees the outdated schema", readyWindows, func() bool {
		r := ready()
		return r.status == 503 && strings.Contains(string(r.body), "version 999")
	})
	exec(fixSQL)
	testenv.EventuallyTrue(t, "/readyz sees the recovery", readyWindows, func() bool { return ready().status == 200 })
}
