package memory

import (
	"errors"
	"testing"

	"github.com/engram-dev/engram/internal/memory/core"
)

// TestFacadeErrorsAreCoreErrors: the errors the service matches
// (errors.Is, errors.As) are core's own values and types, so an error a
// part returns from its own package matches the façade's names, and the
// service needs no second mapping.
func TestFacadeErrorsAreCoreErrors(t *testing.T) {
	for _, c := range []struct {
		facade, core error
	}{
		{ErrNotFound, core.ErrNotFound}, {ErrProtected, core.ErrProtected}, {ErrConflict, core.ErrConflict},
		{ErrNoLLM, core.ErrNoLLM}, {ErrUnavailable, core.ErrUnavailable}, {ErrLocked, core.ErrLocked},
		{ErrBusy, core.ErrBusy}, {ErrLeaseLost, core.ErrLeaseLost},
	} {
		if wrapped := core.DBErr("doing something", c.core); !errors.Is(wrapped, c.facade) {
			t.Errorf("core's %v does not match the façade's", c.core)
		}
	}
	var conflict *ConflictError
	if err := core.Conflictf("cycle via %s", "x"); !errors.As(err, &conflict) || !errors.Is(err, ErrConflict) {
		t.Errorf("core.Conflictf(...) = %v: not a *memory.ConflictError matching ErrConflict", err)
	}
	var quota *QuotaError
	if err := core.OverQuota(QuotaSessionsPerOwner, 1, 1, 1, "sessions", "the owner", "end one"); !errors.As(err, &quota) {
		t.Errorf("core.OverQuota(...) = %v: not a *memory.QuotaError", err)
	}
	fe := &core.FieldErrors{}
	fe.Owner("")
	if v, ok := IsValidation(fe.Err()); !ok || len(v.Fields) != 1 || v.Fields[0].Field != "owner" {
		t.Errorf("core.FieldErrors: IsValidation(%v) = %v, %v", fe.Err(), v, ok)
	}
}
