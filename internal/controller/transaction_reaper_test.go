package controller

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"

	"github.com/engram-dev/engram/internal/tenant"
)

// TestReaperLogsALookInFewLines (issue 26, eleventh review, L1): the
// reaper logged a line per session it could not end, at every look, and a
// tenant-run server names up to 10,000 such sessions a look with new pids
// each time. Now a look logs the first maxReapLinesPerLook of an outcome
// one by one and the rest in one line with the count.
func TestReaperLogsALookInFewLines(t *testing.T) {
	var errorsLogged atomic.Int64
	o := Options{}.withDefaults()
	r := newTransactionReaper(nil, newPoolCache(o), nil, o)
	r.log = logr.New(countingSink{n: &errorsLogged})
	held := make([]tenant.HeldTransaction, 1000)
	for i := range held {
		held[i] = tenant.HeldTransaction{PID: 1000 + i, Role: "engram_b_login", Problem: "permission denied to terminate process"}
	}
	r.reportLook(context.Background(), node{key: "admin@tenant.example:5432/engram"}, held)
	if got, want := errorsLogged.Load(), int64(maxReapLinesPerLook+1); got != want {
		t.Errorf("a look with %d sessions not ended logged %d errors, want %d (%d one by one and one summary)", len(held), got, want, maxReapLinesPerLook)
	}
}
