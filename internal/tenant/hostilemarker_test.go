package tenant

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestHostileStrikesNeverPanicTheWatchdog (issue 26's sixth review,
// MEDIUM 1): on a server a tenant runs, the tenant is superuser and writes
// any quarantine marker. strikes=MaxInt64 made the watchdog's increment
// wrap, and at the role's second flood the back-off shifted by a negative
// amount: a panic, and the operator exited. Now strikes are clamped when
// read and when counted: two floods after such a marker, no look panics,
// every back-off stays within MaxQuarantine, and the marker the watchdog
// writes counts at most maxStrikes.
func TestHostileStrikesNeverPanicTheWatchdog(t *testing.T) {
	f := newQuarantineFixture(t, "hostile-strikes")
	ctx := testCtx(t)
	ident := pgx.Identifier{f.res.LoginRole}.Sanitize()
	var comment string
	if err := f.pool.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1", f.res.LoginRole).Scan(&comment); err != nil {
		t.Fatal(err)
	}
	forged := withQuarantine(comment, quarantineMark{ended: time.Now(), strikes: math.MaxInt64})
	if _, err := f.pool.Exec(ctx, "COMMENT ON ROLE "+ident+" IS "+quoteLiteral(forged)); err != nil {
		t.Fatal(err)
	}
	policy := LockPolicy{Threshold: 20, Quarantine: time.Second, MaxQuarantine: 3 * time.Second}
	cfg := mustParseConfig(t, f.url)
	w, err := OpenLockWatchdog(ctx, cfg, policy)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)

	look := func(n int) (hogs []LockHog, panicked any) {
		defer func() { panicked = recover() }()
		hogs, err := w.Look(ctx)
		if err != nil {
			t.Logf("look %d: %v", n, err)
		}
		return hogs, nil
	}
	floods := 0
	for n := 1; floods < 2; n++ {
		if n > 100 {
			t.Fatalf("the tenant flooded %d time(s) in 100 looks; want 2", floods)
		}
		if err := f.flood(); err == nil {
			floods++ // the second waits for the first back-off to end
		}
		hogs, p := look(n)
		if p != nil {
			t.Fatalf("look %d panicked after flood %d: %v", n, floods, p)
		}
		for _, h := range hogs {
			if h.Quarantine > policy.MaxQuarantine {
				t.Errorf("look %d: a quarantine of %v; want at most MaxQuarantine (%v)", n, h.Quarantine, policy.MaxQuarantine)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := f.pool.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1", f.res.LoginRole).Scan(&comment); err != nil {
		t.Fatal(err)
	}
	if m := parseMarker(&comment); m.quarantine.strikes < 1 || m.quarantine.strikes > maxStrikes {
		t.Errorf("the marker counts %d strike(s) (%q); want 1..%d", m.quarantine.strikes, comment, maxStrikes)
	}
	if want := fmt.Sprintf("strikes=%d", maxStrikes); !strings.Contains(comment, want) {
		t.Errorf("the marker %q does not say %s: the forged count was clamped to it and the floods stay at the cap", comment, want)
	}
}
