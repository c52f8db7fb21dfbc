package auth

import (
	"errors"
	"regexp"

	"github.com/engram-dev/engram/internal/memory"
)

// identityPattern is what a token name or a signed token's subject may be:
// short, printable, no spaces, so it reads well in history and logs and
// cannot break the tokens file's syntax.
var identityPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@+/\-]{0,127}$`)

// The errors name no value: they end up in logs, where owner ids and
// anything near a token are never written.
var (
	errIdentity = errors.New("must be 1-128 characters of letters, digits and . _ : @ + / -, starting with a letter or digit")
	errOwner    = errors.New("must be an owner id: 1-256 characters of letters, digits and . _ : @ + -, starting with a letter or digit")
)

// CheckIdentity checks a token name or a signed token's subject.
func CheckIdentity(s string) error { return checkIdentity(s) }

func checkIdentity(s string) error {
	if !identityPattern.MatchString(s) {
		return errIdentity
	}
	return nil
}

// checkOwner applies the engine's rule for owner ids, so a binding that no
// request could ever match is refused up front.
func checkOwner(s string) error {
	if !memory.ValidScopeID(s) {
		return errOwner
	}
	return nil
}
