package tenant

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DefaultTempFileLimit is the temp_file_limit of a tenant's login role
// (the operator flag --tenant-temp-file-limit).
const DefaultTempFileLimit = "2GB"

// ensureTempFileLimit sets the login role's temp_file_limit to limit (a
// PostgreSQL size, e.g. "2GB") on every pass; "" leaves it alone. Without
// it one query of the tenant's (a sort with a tiny work_mem) writes
// temporary files until the server's disk is full, and then the WAL write
// fails and the server stops for every tenant (issue 26's fourth review).
// temp_file_limit is superuser-only: the tenant cannot SET it away, nor
// reset its role's default. Setting the default needs a superuser admin
// or GRANT SET ON PARAMETER temp_file_limit; without either, res.Warnings
// says what a DBA must run.
func ensureTempFileLimit(ctx context.Context, conn *pgx.Conn, limit string, names roleNames, res *Result) error {
	if limit == "" {
		return nil
	}
	if strings.ContainsAny(limit, `'\`) {
		return fmt.Errorf("the temp_file_limit %q is not a size", limit)
	}
	want := "temp_file_limit=" + limit
	var have []string
	var may bool
	err := conn.QueryRow(ctx, `SELECT coalesce((SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
			WHERE r.rolname = $1 AND s.setdatabase = 0), '{}'),
		(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) OR has_parameter_privilege('temp_file_limit', 'SET')`,
		names.login).Scan(&have, &may)
	if err != nil {
		return fmt.Errorf("reading the temp_file_limit of role %q: %w", names.login, err)
	}
	if slices.Contains(have, want) {
		return nil
	}
	stmt := fmt.Sprintf("ALTER ROLE %s SET temp_file_limit = '%s'", pgx.Identifier{names.login}.Sanitize(), limit)
	if !may {
		res.Warnings = append(res.Warnings, fmt.Sprintf("login role %s may write temporary files without bound (one sort can fill the server's disk), "+
			"and the admin may not limit them (temp_file_limit is a superuser's setting): a superuser runs %s, or GRANT SET ON PARAMETER temp_file_limit "+
			"TO the admin role (docs/security.md, \"What the DBA must do\")", names.login, stmt))
		return nil
	}
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("limiting the temporary files of role %q: %w", names.login, err)
	}
	res.Changes = append(res.Changes, fmt.Sprintf("set the temp_file_limit of role %s to %s", names.login, limit))
	return nil
}
