package write

import (
	"fmt"

	"github.com/engram-dev/engram/internal/memory/core"
)

// GlobalOwner is the reserved owner id of tenant-wide memories (categories
// with global: true). Owner ids must start with a letter or digit, so no
// request can name it: only the engine reads and writes under it.
const GlobalOwner = "_global"

// routeGlobal moves a write of a global category to GlobalOwner, without
// agent or session (tenant-wide knowledge belongs to no conversation).
// Only the user or the system may write it.
func (s *Store) routeGlobal(req *AddRequest) error {
	c, ok := s.core.Policy.Category(req.Category)
	if !ok || !c.Global {
		return nil
	}
	if req.OwnerOnly {
		return ownerOnlyError{category: c.Name}
	}
	if req.Source != core.SourceUser && req.Source != core.SourceSystem {
		return &core.RuleError{Rule: fmt.Sprintf("category %q is global: only source user or system may write it", c.Name)}
	}
	req.Owner, req.Agent, req.Session = GlobalOwner, "", ""
	return nil
}

// ownerOnlyError refuses a global category to a write that may reach its
// own owner only (AddRequest.OwnerOnly); it is a core.ErrProtected (403).
type ownerOnlyError struct{ category string }

func (e ownerOnlyError) Error() string {
	return fmt.Sprintf("category %q is global (shown to every owner): a token bound to one owner, or an extraction, may not write it", e.category)
}

// Is makes errors.Is(err, core.ErrProtected) true.
func (ownerOnlyError) Is(target error) bool { return target == core.ErrProtected }
