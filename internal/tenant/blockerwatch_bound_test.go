package tenant

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestBlockerWatchKeepsFewUnresolvedBlockers (issue 26's twelfth review,
// HIGH 2): a tenant-run server naming new blockers at every look, none of
// which the watch ends, made it keep every one for the whole pass and join
// them all into the provisioning's error (19 MiB after 10 s). Now it keeps
// maxUnresolvedBlockers, counts the rest, and the error stays short.
func TestBlockerWatchKeepsFewUnresolvedBlockers(t *testing.T) {
	const looks, perLook = 20, 1000
	w := &blockerWatch{seen: map[blockerKey]*seenBlocker{}, unresolved: map[blockerKey]Blocker{},
		cancel: func() {}, done: make(chan struct{})}
	close(w.done)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reports := 0
	w.policy.Report = func(Blocker) { reports++ }
	now := time.Now()
	for look := range looks {
		ends := newLookEnds(ctx)
		for i := range perLook {
			// Not a tenant's session, in the way for an hour: reported,
			// never ended.
			s := blockingSession{pid: look*perLook + i + 1, roleOID: 10, role: "postgres"}
			key := blockerKey{s.pid, s.roleOID}
			w.act(ends, key, s, &seenBlocker{first: now.Add(-time.Hour)}, now)
		}
		ends.done()
	}
	if got := len(w.unresolved); got > maxUnresolvedBlockers {
		t.Fatalf("the watch keeps %d unresolved blockers, want at most %d", got, maxUnresolvedBlockers)
	}
	kept := w.stop()
	err := error(&BlockedError{Err: errors.New("canceling statement due to lock timeout"), Blockers: kept, More: w.notKeptCount()})
	msg := err.Error()
	if len(msg) > 8<<10 {
		t.Fatalf("the provisioning's error has %d bytes, want at most 8 KiB", len(msg))
	}
	if want := "and 19984 more"; !strings.Contains(msg, want) {
		t.Errorf("the error %q does not say %q", msg, want)
	}
	if reports != looks*perLook {
		t.Errorf("%d reports, want one per blocker (%d)", reports, looks*perLook)
	}
}
