package auth

import "strings"

// TokenWithRole is the token of the first valid line of a tokens file whose
// role includes min, or "" when there is none. `kubectl engram` picks the
// admin token of a runtime's token Secret with it.
func TokenWithRole(raw []byte, min Role) string {
	for _, l := range tokenLines(raw) {
		if e, err := parseTokenLine(l.text); err == nil && e.cred.Role.Includes(min) {
			return strings.Fields(l.text)[0]
		}
	}
	return ""
}
