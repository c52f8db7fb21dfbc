package tenant

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ensureReservedConnections lets the admin role use the connection slots
// PostgreSQL 16 and later keep for pg_use_reserved_connections
// (reserved_connections), when it may grant itself that role. A tenant's
// login role, at its CONNECTION LIMIT, still takes slots; several tenants
// (or another application) may take every slot open to non-superusers,
// and then the operator could not log in to provision, reap or watch.
//
// A superuser needs nothing (superuser_reserved_connections). A CREATEROLE
// admin may grant itself the role only if it holds it WITH ADMIN OPTION
// (PostgreSQL 16+ gives CREATEROLE no say over predefined roles): then it
// does, once. Otherwise a DBA runs the one-line grant docs/security.md
// gives ("Reserved connections for the operator"); provisioning does not
// warn, the grant being a hardening, not a requirement. Before 16 there is
// no such role.
func ensureReservedConnections(ctx context.Context, conn *pgx.Conn, res *Result) error {
	var super, exists bool
	if err := conn.QueryRow(ctx, `SELECT rolsuper, to_regrole('pg_use_reserved_connections') IS NOT NULL
		FROM pg_roles WHERE rolname = current_user`).Scan(&super, &exists); err != nil {
		return fmt.Errorf("reading the admin role: %w", err)
	}
	if super || !exists {
		return nil
	}
	var uses, canGrant bool
	if err := conn.QueryRow(ctx, `SELECT pg_has_role('pg_use_reserved_connections', 'USAGE'),
			pg_has_role('pg_use_reserved_connections', 'MEMBER WITH ADMIN OPTION')`).Scan(&uses, &canGrant); err != nil {
		return fmt.Errorf("checking pg_use_reserved_connections: %w", err)
	}
	if uses || !canGrant {
		return nil
	}
	if _, err := conn.Exec(ctx, "GRANT pg_use_reserved_connections TO CURRENT_USER"); err != nil {
		return fmt.Errorf("granting pg_use_reserved_connections to the admin role: %w", err)
	}
	res.Changes = append(res.Changes, "granted pg_use_reserved_connections to the admin role")
	return nil
}
