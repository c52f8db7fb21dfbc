package tenant

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// quarantineFlooder is a fake tenant-run server whose role list names
// MaxTenantWatchedRoles new OIDs at every Refresh, each marked quarantined
// until `until`, with its limit at 0; every restore fails (no
// connectionSlots row).
func quarantineFlooder(t *testing.T, until time.Time) *pgx.ConnConfig {
	t.Helper()
	var base atomic.Int64
	base.Store(100000)
	url := fakePG(t, func(q string) fakeAnswer {
		switch {
		case strings.Contains(q, "max_locks_per_transaction"):
			return lockSettingsAnswer
		case strings.Contains(q, "FROM pg_roles r") && strings.Contains(q, "rolcanlogin") && strings.Contains(q, "LIMIT"):
			return rolesAnswer(func(emit func(...string) bool) {
				b := base.Add(MaxTenantWatchedRoles)
				for i := range MaxTenantWatchedRoles {
					oid := b + int64(i)
					if !emit(fmt.Sprint(oid), fmt.Sprintf("r%d", oid), "0",
						fmt.Sprintf("managed-by=engram;uid=u%d;runtime=team-a/m;quarantined-until=%d;strikes=1", oid, until.Unix())) {
						return
					}
				}
			})
		case strings.Contains(q, "count(pg_get_userbyid"):
			return fakeAnswer{cols: []fakeCol{{"count", 23}}, rows: func(emit func(...string) bool) { emit("1") }}
		case strings.Contains(q, "pg_lock_status()"):
			return fakeAnswer{cols: locksCols}
		}
		return fakeAnswer{}
	})
	cfg := mustParseConfig(t, url)
	BoundTenantServer(cfg)
	return cfg
}

// TestWatchdogQuarantinesStayWithinListedRoles (issue 26's twelfth review,
// HIGH 1): a tenant-run server listing new OIDs at every look, each with a
// quarantine marker whose restore fails, grew the watchdog's quarantines
// by MaxRoles entries a look, for as long as the node was followed. Now
// they are pruned to the roles listed, so at most MaxRoles.
func TestWatchdogQuarantinesStayWithinListedRoles(t *testing.T) {
	const looks = 8
	cfg := quarantineFlooder(t, time.Now().Add(-time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := mustOpenWatchdog(t, ctx, cfg, LockPolicy{MaxRoles: MaxTenantWatchedRoles})
	for n := 0; n < looks && ctx.Err() == nil; n++ {
		if _, err := d.Look(ctx); err != nil {
			t.Fatalf("look %d: %v", n, err)
		}
		if got := len(d.quarantined); got > MaxTenantWatchedRoles {
			t.Fatalf("after look %d the watchdog keeps %d quarantines, want at most %d", n, got, MaxTenantWatchedRoles)
		}
	}
	for oid := range d.quarantined {
		if _, listed := d.roles[oid]; !listed {
			t.Fatalf("a quarantine of role %d, which the last look did not list, is kept", oid)
		}
	}
}

// TestWatchdogClampsAMarkersQuarantine (issue 26's twelfth review, HIGH
// 1): a marker's quarantined-until years ahead is taken in as at most
// MaxQuarantine from now.
func TestWatchdogClampsAMarkersQuarantine(t *testing.T) {
	cfg := quarantineFlooder(t, time.Now().Add(10*365*24*time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := mustOpenWatchdog(t, ctx, cfg, LockPolicy{MaxRoles: MaxTenantWatchedRoles})
	most := time.Now().Add(DefaultMaxQuarantine + time.Minute)
	if len(d.quarantined) == 0 {
		t.Fatal("no quarantine taken in from the markers")
	}
	for oid, q := range d.quarantined {
		if q.until.After(most) {
			t.Fatalf("role %d: quarantined until %s, want at most %s", oid, q.until, most)
		}
	}
}
