package tenant

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrMultiHost: a tenant's connection Secret names more than one server.
var ErrMultiHost = errors.New("the connection names more than one server")

// CheckSingleServer refuses a URL that names more than one server (a
// multi-host URL, or host= in its query). pgx connects to the next host
// whenever the first refuses with almost any error, "too many connections
// for role" included, which a tenant causes at will: a tenant's Secret
// naming the shared server first and its own server next is provisioned on
// its own server but known to the operator by the first host's address,
// and the operator's events about roles on the tenant's server (where it
// may forge any marker) landed on another tenant's runtime (issue 26's
// fifth review, MEDIUM 3b). A Secret the platform team writes may name a
// standby list; a tenant's names one server.
func CheckSingleServer(url string) error {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		// The parse error could quote the URL, password included.
		return errors.New("not a valid PostgreSQL URL")
	}
	for _, fb := range cfg.Fallbacks {
		if fb.Host != cfg.Host || fb.Port != cfg.Port {
			return fmt.Errorf("%w: it lists %s:%d and %s:%d; a connection Secret in a runtime's namespace must name exactly one host and port",
				ErrMultiHost, cfg.Host, cfg.Port, fb.Host, fb.Port)
		}
	}
	return nil
}
