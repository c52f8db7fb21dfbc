package core

// ValidScopeID reports whether s is a valid owner, agent or session id: the
// rule every request is checked against, for callers that check ids ahead
// of a request (the service's credentials bound to one owner).
func ValidScopeID(s string) bool { return scopeID.MatchString(s) }
