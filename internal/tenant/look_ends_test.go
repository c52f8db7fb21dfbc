package tenant

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// slowTerminates is a tenant-run server (fakePG) that lists n sessions of
// another tenant's marked login role, old enough to be ended, to both the
// blocker watch and the reaper, and answers each pg_terminate_backend
// after delay, counting them in asked.
func slowTerminates(n int, delay time.Duration, asked *atomic.Int32) func(string) fakeAnswer {
	marker := markerPrefix + "; uid=someone-else; runtime=team-b/mem"
	return func(q string) fakeAnswer {
		switch {
		case strings.Contains(q, "pg_terminate_backend"):
			return fakeAnswer{cols: []fakeCol{{"t", 16}}, rows: func(emit func(...string) bool) {
				asked.Add(1)
				time.Sleep(delay)
				emit("t")
			}}
		case strings.Contains(q, "pg_blocking_pids"):
			return fakeAnswer{cols: []fakeCol{{"pid", 23}, {"usesysid", 26}, {"rolname", 25}, {"canbe", 16}, {"admin", 16}, {"c", 25}, {"age", 701}},
				rows: func(emit func(...string) bool) {
					for i := range n {
						if !emit(strconv.Itoa(2000+i), strconv.Itoa(17000+i), "engram_b_login", "t", "f", marker, "3600") {
							return
						}
					}
				}}
		case strings.Contains(q, "SELECT EXISTS (SELECT 1 FROM pg_extension"):
			return fakeAnswer{cols: []fakeCol{{"exists", 16}}, rows: func(emit func(...string) bool) { emit("f") }}
		case strings.Contains(q, "FROM pg_stat_activity a"):
			return fakeAnswer{cols: []fakeCol{{"pid", 23}, {"usesysid", 26}, {"rolname", 25}, {"c", 25}, {"vxid", 25}, {"age", 701}},
				rows: func(emit func(...string) bool) {
					for i := range n {
						if !emit(strconv.Itoa(1000+i), "16400", "engram_b_login", marker, fmt.Sprintf("%d/1", i+3), "3600") {
							return
						}
					}
				}}
		}
		return fakeAnswer{}
	}
}

// TestBlockerWatchStopIsBoundedBySlowTerminates (issue 26, eleventh
// review, MEDIUM 1): each terminate of the blocker watch had a fresh
// lookTimeout that ignored stop(), so a tenant-run server listing 5
// blockers and answering each terminate after 3 s held stop(), and the
// provisioning pass with its worker and namespace slot, 13.8 s (10,000 ×
// 9.9 s: a day). The terminates of a look now share the look's deadline
// and stop once the watch is stopped: stop() returns once the terminate in
// flight is answered.
func TestBlockerWatchStopIsBoundedBySlowTerminates(t *testing.T) {
	const blockers, delay = 5, 3 * time.Second
	var asked, reports atomic.Int32
	conn := fakeConn(t, fakePG(t, slowTerminates(blockers, delay, &asked)))
	cfg := conn.Config()
	BoundTenantServer(cfg)
	w := startBlockerWatch(context.Background(), cfg, 4242, Owner{UID: "me", Namespace: "team-a", Name: "mem"},
		BlockerPolicy{MaxAge: time.Second, Interval: 200 * time.Millisecond, Report: func(Blocker) { reports.Add(1) }})
	deadline := time.Now().Add(5 * time.Second)
	for asked.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if asked.Load() == 0 {
		w.stop()
		t.Fatal("the watch asked no terminate within 5 s: the fake server does not answer as intended")
	}
	start := time.Now() // the pass ends while a terminate is in flight
	w.stop()
	took := time.Since(start)
	t.Logf("stop() took %s after the pass ended (%d terminates asked, %d reported; each answered after %s)",
		took.Round(100*time.Millisecond), asked.Load(), reports.Load(), delay)
	if bound := lookTimeout + time.Second; took > bound {
		t.Errorf("stop() took %s after the pass ended, want at most %s", took, bound)
	}
	if got := asked.Load(); got >= blockers {
		t.Errorf("%d terminates asked after the watch was stopped in its first, want fewer than %d", got, blockers)
	}
}

// TestReaperLookIsBoundedBySlowTerminates (issue 26, eleventh review,
// MEDIUM 2): each terminate of a reaper look had a fresh lookTimeout that
// ignored the caller, so a tenant-run server listing 5 old sessions and
// answering each terminate after 3 s held the look, and a tenant look
// slot, 15 s (10,000 × 9.9 s: a day). Now a look returns once its caller
// cancels (after the terminate in flight) and within its own deadline.
func TestReaperLookIsBoundedBySlowTerminates(t *testing.T) {
	const sessions, delay = 5, 3 * time.Second
	for _, tc := range []struct {
		name     string
		cancelIn time.Duration // 0: the caller never cancels
		bound    time.Duration
	}{
		{"caller cancels after 1s", time.Second, delay + time.Second},
		{"look's own deadline", 0, lookTimeout + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int32
			conn := fakeConn(t, fakePG(t, slowTerminates(sessions, delay, &asked)))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelIn > 0 {
				time.AfterFunc(tc.cancelIn, cancel)
			}
			start := time.Now()
			held, err := (&Reaper{MaxAge: time.Second}).Look(ctx, conn)
			took := time.Since(start)
			t.Logf("a look took %s: %d terminates asked, %d reported, err=%v (lookTimeout %s)",
				took.Round(100*time.Millisecond), asked.Load(), len(held), err, lookTimeout)
			if took > tc.bound {
				t.Errorf("the look took %s, want at most %s", took, tc.bound)
			}
			if got := asked.Load(); got == 0 || got >= sessions {
				t.Errorf("%d terminates asked, want at least one and fewer than %d", got, sessions)
			}
		})
	}
}
