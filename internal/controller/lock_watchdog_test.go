package controller

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"

	"github.com/engram-dev/engram/internal/tenant"
)

// TestLockWatchdogLogsAnUnendedSessionOnceAMinute (issue 26's fourth
// review, LOW): a watchdog whose connection user may not signal (a
// tenant's own login given as a connection Secret) finds the same session
// at every look, each second, and logged an error each time. Now once a
// minute per session; another session is logged at once.
func TestLockWatchdogLogsAnUnendedSessionOnceAMinute(t *testing.T) {
	var errorsLogged atomic.Int64
	w := newLockWatchdog(nil, newPoolCache(Options{}.withDefaults()), nil, Options{}.withDefaults())
	w.log = logr.New(countingSink{n: &errorsLogged})
	n := node{key: "admin@127.0.0.1:5432/engram", addr: "127.0.0.1:5432/engram"}
	hog := tenant.LockHog{PID: 11, Role: "engram_x_login", Problem: "the operator may not end it"}
	for range 5 {
		w.report(context.Background(), n, hog)
	}
	if got := errorsLogged.Load(); got != 1 {
		t.Fatalf("five looks finding the same session logged %d errors, want 1", got)
	}
	hog.PID = 12
	w.report(context.Background(), n, hog)
	if got := errorsLogged.Load(); got != 2 {
		t.Fatalf("another session logged %d errors in all, want 2", got)
	}
}

// TestLockWatchdogLogsFewEndedRolesALook (issue 26's thirteenth review,
// L3): a tenant-run server that names 1,000 roles over the threshold in a
// look, each answered as ended, made 1,000 log lines a look. Now the first
// few are logged one by one and the rest in one line with their count.
func TestLockWatchdogLogsFewEndedRolesALook(t *testing.T) {
	var infos atomic.Int64
	w := newLockWatchdog(nil, newPoolCache(Options{}.withDefaults()), nil, Options{}.withDefaults())
	w.log = logr.New(countingSink{n: new(atomic.Int64), infos: &infos})
	n := node{key: "admin@127.0.0.1:5432/theirs", addr: "127.0.0.1:5432/theirs"}
	hogs := make([]tenant.LockHog, 1_000)
	for i := range hogs {
		hogs[i] = tenant.LockHog{PID: i + 1, Role: "r", Ended: true, Sessions: 1}
	}
	w.reportHogs(context.Background(), n, hogs)
	if got := infos.Load(); got != maxReapLinesPerLook+1 {
		t.Fatalf("a look ending 1,000 roles logged %d lines, want %d", got, maxReapLinesPerLook+1)
	}
}

// countingSink counts the errors (and, with infos, the info lines) logged
// through it.
type countingSink struct {
	logr.LogSink
	n, infos *atomic.Int64
}

func (s countingSink) Enabled(int) bool { return true }
func (s countingSink) Info(int, string, ...any) {
	if s.infos != nil {
		s.infos.Add(1)
	}
}
func (s countingSink) Error(error, string, ...any) {
	s.n.Add(1)
}
func (s countingSink) WithValues(...any) logr.LogSink { return s }
func (s countingSink) WithName(string) logr.LogSink   { return s }
func (s countingSink) Init(logr.RuntimeInfo)          {}
