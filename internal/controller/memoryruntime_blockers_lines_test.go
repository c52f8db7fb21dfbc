package controller

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// TestBlockerWatchLogsALookInFewLines (issue 26, twelfth review, L2): the
// provisioning's blocker watch logged a line (and recorded a Warning) per
// blocker it could not end, and a tenant-run server names up to 10,000 a
// look with new pids each time. Now a look logs the first
// maxReapLinesPerLook of an outcome one by one and the rest in one line.
func TestBlockerWatchLogsALookInFewLines(t *testing.T) {
	var lines atomic.Int64
	ctx := ctrl.LoggerInto(context.Background(), logr.New(infoCountingSink{n: &lines}))
	r := &MemoryRuntimeReconciler{}
	rt := &memoryv1alpha1.MemoryRuntime{}
	count := &reapLines{}
	for look := range 2 {
		lines.Store(0)
		for i := range 1000 {
			b := tenant.Blocker{PID: look*1000 + i + 1, Role: "postgres", Kind: tenant.BlockerNotTenant, Problem: "not the login role of an Engram tenant"}
			r.reportBlockerLine(ctx, rt, "engram_a", "admin", b, count)
		}
		blockerLookDone(ctx, "engram_a", count)
		if got, want := lines.Load(), int64(maxReapLinesPerLook+1); got != want {
			t.Fatalf("look %d: 1,000 blockers not ended logged %d lines, want %d (%d one by one and one summary)", look, got, want, maxReapLinesPerLook)
		}
	}
}

// infoCountingSink counts the lines logged through it.
type infoCountingSink struct {
	logr.LogSink
	n *atomic.Int64
}

func (s infoCountingSink) Enabled(int) bool               { return true }
func (s infoCountingSink) Info(int, string, ...any)       { s.n.Add(1) }
func (s infoCountingSink) Error(error, string, ...any)    { s.n.Add(1) }
func (s infoCountingSink) WithValues(...any) logr.LogSink { return s }
func (s infoCountingSink) WithName(string) logr.LogSink   { return s }
func (s infoCountingSink) Init(logr.RuntimeInfo)          {}
