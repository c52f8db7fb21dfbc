package tenant

import (
	"errors"
	"testing"
)

// TestCheckSingleServer (issue 26's fifth review, MEDIUM 3b): a URL naming
// more than one server, in its authority or in host=, is refused; one
// server is accepted, with sslmode=prefer too (pgx's fallback without TLS
// is the same server).
func TestCheckSingleServer(t *testing.T) {
	for _, c := range []struct {
		url   string
		multi bool
	}{
		{"postgres://u:p@db:5432/engram", false},
		{"postgres://u:p@db:5432/engram?sslmode=prefer", false},
		{"postgres://u:p@db:5432/engram?sslmode=disable", false},
		{"postgres://u:p@shared:5432,own:5432/engram?sslmode=disable", true},
		{"postgres://u:p@db:5432,db:5433/engram", true},
		{"postgres://u:p@db:5432/engram?host=shared,own", true},
	} {
		err := CheckSingleServer(c.url)
		if got := errors.Is(err, ErrMultiHost); got != c.multi {
			t.Errorf("CheckSingleServer(%q) = %v; want multi-host %v", c.url, err, c.multi)
		}
		if !c.multi && err != nil {
			t.Errorf("CheckSingleServer(%q) = %v; want accepted", c.url, err)
		}
	}
}
