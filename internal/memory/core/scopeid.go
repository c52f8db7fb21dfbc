package core

// ValidScopeID reports whether s is a valid owner, agent or session id: the
// rule every request is checked against (ScopeIDRule), for callers that
// check ids ahead of a request too (the service's credentials bound to one
// owner). It is the regular expression scopeID, written out: every request
// checks at least its owner, and the regexp engine cost ~3 % of the
// service's CPU per search (issue 32). TestValidScopeIDMatchesRegexp holds
// the two together.
func ValidScopeID(s string) bool {
	if len(s) == 0 || len(s) > 256 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != ':' && c != '@' && c != '+' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
