package tenant

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// DefaultConnectionShare is the share of the server's connection slots, in
// percent, one tenant's login role may hold at once (the operator flag
// --tenant-connection-share).
const DefaultConnectionShare = 25

// ConnectionPolicy sizes the CONNECTION LIMIT of a tenant's login role.
// Without one, a single tenant credential may open every slot the server
// does not reserve for superusers, and then no other tenant, job or
// non-superuser operator can connect (issue 26's third review).
type ConnectionPolicy struct {
	// Share is the percentage of the server's slots (max_connections less
	// the reserved ones) the role may hold; zero means
	// DefaultConnectionShare, negative sets no limit (CONNECTION LIMIT -1).
	Share int
	// Floor is what the runtime itself needs (replicas × the service's pool
	// size + jobs + a margin): the limit is never below it, so a correct
	// service never meets "too many connections for role".
	Floor int
}

// connectionLimit is the limit of p on a server with slots connection
// slots open to non-superusers; -1 means none.
func (p ConnectionPolicy) connectionLimit(slots int) int {
	share := p.Share
	switch {
	case share < 0:
		return -1
	case share == 0:
		share = DefaultConnectionShare
	}
	return max(slots*min(share, 100)/100, p.Floor, 1)
}

// ensureConnectionLimit sets the login role's CONNECTION LIMIT to what p
// gives on this server, on every pass: a changed max_connections, share or
// floor is followed. res.ConnectionLimit records it.
func ensureConnectionLimit(ctx context.Context, conn *pgx.Conn, p ConnectionPolicy, names roleNames, res *Result) error {
	var slots, have int
	// reserved_connections exists from PostgreSQL 16 on; missing_ok gives
	// NULL before.
	if err := conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int
			- current_setting('superuser_reserved_connections')::int
			- coalesce(current_setting('reserved_connections', true)::int, 0),
			(SELECT rolconnlimit FROM pg_roles WHERE rolname = $1)`, names.login).Scan(&slots, &have); err != nil {
		return fmt.Errorf("reading the connection slots of the server and of role %q: %w", names.login, err)
	}
	want := p.connectionLimit(slots)
	res.ConnectionLimit = want
	if have == want {
		return nil
	}
	stmt := fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT %d", pgx.Identifier{names.login}.Sanitize(), want)
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("limiting the connections of role %q: %w", names.login, err)
	}
	res.Changes = append(res.Changes, fmt.Sprintf("set the connection limit of role %s to %d (was %d)", names.login, want, have))
	return nil
}
