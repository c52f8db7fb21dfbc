package v1alpha1

// ServerMoveRunning reports whether a move in phase has not switched yet
// and not ended.
func ServerMoveRunning(phase string) bool {
	switch phase {
	case ServerMovePreparing, ServerMoveCopying, ServerMoveCatchingUp, ServerMoveFrozen:
		return true
	}
	return false
}
