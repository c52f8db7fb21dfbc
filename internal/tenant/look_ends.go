package tenant

import (
	"context"
	"time"
)

// lookEnds is the one deadline every terminate of a look shares (the
// blocker watch's, the reaper's). A terminate is not cancelled by the
// look's caller (once sent, its answer is what tells whether the session
// was ended, and the report must not be lost), but it gets only what is
// left of the look's own deadline, and after the first one that times
// out, or once the caller has cancelled, the look starts no other: a
// server a tenant runs lists up to 10,000 sessions and could answer each
// terminate just before a timeout of its own, holding the look (and what
// waits for it: a provisioning's stop, a tenant look slot) for hours
// (issue 26, eleventh review, MEDIUM 1 and 2). The sessions not tried
// are found again at the next look.
type lookEnds struct {
	caller context.Context // the look's context: its end stops the ends
	ctx    context.Context // cancel-proof, with the look's deadline
	cancel context.CancelFunc
	over   bool
}

// newLookEnds makes the ends of the look whose context is look; release
// it with done.
func newLookEnds(look context.Context) *lookEnds {
	deadline, ok := look.Deadline()
	if !ok {
		deadline = time.Now().Add(lookTimeout)
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(look), deadline)
	return &lookEnds{caller: look, ctx: ctx, cancel: cancel}
}

// more reports whether the look may still start a terminate.
func (e *lookEnds) more() bool {
	if e.caller.Err() != nil || e.ctx.Err() != nil {
		e.over = true
	}
	return !e.over
}

// after records how a terminate went: once the shared deadline has
// passed, no other is started.
func (e *lookEnds) after() {
	if e.ctx.Err() != nil {
		e.over = true
	}
}

func (e *lookEnds) done() { e.cancel() }
