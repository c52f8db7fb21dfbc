package tenant

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RotatePassword gives the login role of schema a new random password and
// returns it. Existing sessions stay connected; new ones need the new
// password. It refuses a role that does not carry owner's UID.
func RotatePassword(ctx context.Context, admin *pgxpool.Pool, schema string, owner Owner) (string, error) {
	login := LoginRole(schema)
	exists, m, err := roleStateOnPool(ctx, admin, login)
	if err != nil {
		return "", err
	}
	if !exists {
		return "", fmt.Errorf("rotating password: role %q does not exist; provision the tenant first", login)
	}
	if err := mustOwn(m, owner, "role", login); err != nil {
		return "", fmt.Errorf("rotating password: %w", err)
	}
	pw, err := newPassword()
	if err != nil {
		return "", err
	}
	verifier, err := scramVerifier(pw)
	if err != nil {
		return "", err
	}
	if _, err := admin.Exec(ctx, "ALTER ROLE "+pgx.Identifier{login}.Sanitize()+" PASSWORD "+quoteLiteral(verifier)); err != nil {
		return "", fmt.Errorf("rotating password of %q: %w", login, err)
	}
	return pw, nil
}

// mustOwn accepts only an object whose marker carries owner's UID: rotate
// and drop never act on a legacy, adopted-elsewhere or foreign object.
func mustOwn(m marker, owner Owner, kind, name string) error {
	switch {
	case !m.managed:
		return fmt.Errorf("%s %q is %w", kind, name, ErrNotManaged)
	case m.uid != owner.UID:
		return fmt.Errorf("%s %q belongs to %s, not to this runtime: it is %w", kind, name, describeRuntime(m.runtime), ErrOwnedByOther)
	}
	return nil
}

// DropResult says what Drop removed.
type DropResult struct {
	SchemaDropped bool
	RolesDropped  []string
}

// Drop removes the tenant: the schema with everything in it (CASCADE) and
// both roles. It refuses (ErrNotManaged, ErrOwnedByOther) when any of them
// does not carry owner's UID, and is a no-op for a tenant that is already gone.
func Drop(ctx context.Context, admin *pgxpool.Pool, schema string, owner Owner) (*DropResult, error) {
	if !ValidSchemaName(schema) {
		return nil, fmt.Errorf("dropping schema %q: invalid schema name", schema)
	}
	names := roleNames{owner: OwnerRole(schema), login: LoginRole(schema)}
	res := &DropResult{}
	err := withTenantLock(ctx, admin, schema, func(conn *pgx.Conn) error {
		exists, m, err := schemaState(ctx, conn, schema)
		if err != nil {
			return err
		}
		if exists {
			if err := mustOwn(m, owner, "schema", schema); err != nil {
				return fmt.Errorf("refusing to drop: %w", err)
			}
		}
		var roles []string
		for _, r := range []string{names.login, names.owner} {
			rExists, rm, err := roleState(ctx, conn, r)
			if err != nil {
				return err
			}
			if !rExists {
				continue
			}
			if err := mustOwn(rm, owner, "role", r); err != nil {
				return fmt.Errorf("refusing to drop: %w", err)
			}
			roles = append(roles, r)
		}
		if exists {
			if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
				return fmt.Errorf("dropping schema: %w", err)
			}
			res.SchemaDropped = true
		}
		for _, r := range roles {
			ident := pgx.Identifier{r}.Sanitize()
			if err := actAs(ctx, conn, r); err != nil {
				return err
			}
			// DROP OWNED removes the role's remaining privileges in this
			// database (e.g. on the extension schema) so DROP ROLE can succeed.
			if _, err := conn.Exec(ctx, "DROP OWNED BY "+ident); err != nil {
				return fmt.Errorf("dropping privileges of %q: %w", r, err)
			}
			if _, err := conn.Exec(ctx, "DROP ROLE "+ident); err != nil {
				return fmt.Errorf("dropping role %q: %w", r, err)
			}
			res.RolesDropped = append(res.RolesDropped, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dropping tenant %q: %w", schema, err)
	}
	return res, nil
}

// SchemaStatus is the migration state of a tenant schema.
type SchemaStatus struct {
	Current int // applied version, 0 when the schema is not migrated
	Latest  int // version this binary migrates to
}

// UpToDate reports whether the schema is at the binary's version.
func (s SchemaStatus) UpToDate() bool { return s.Current == s.Latest }

// Status reads the schema version; it works with the login role's
// connection too (SELECT on schema_migrations).
func Status(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema string) (SchemaStatus, error) {
	cur, err := currentVersion(ctx, db, schema)
	if err != nil {
		return SchemaStatus{}, err
	}
	return SchemaStatus{Current: cur, Latest: LatestVersion}, nil
}

// actAs makes sure the admin has the privileges of role, which DROP OWNED
// BY needs: from PostgreSQL 16 on, a CREATEROLE admin holds the roles it
// created with ADMIN only, without their privileges.
func actAs(ctx context.Context, conn *pgx.Conn, role string) error {
	var has bool
	if err := conn.QueryRow(ctx, `SELECT pg_has_role(current_user, $1, 'USAGE')`, role).Scan(&has); err != nil {
		return fmt.Errorf("checking the admin's privileges of %q: %w", role, err)
	}
	if has {
		return nil
	}
	if _, err := conn.Exec(ctx, "GRANT "+pgx.Identifier{role}.Sanitize()+" TO CURRENT_USER"); err != nil {
		return fmt.Errorf("granting %q to the admin role before dropping it: %w", role, err)
	}
	return nil
}

func roleStateOnPool(ctx context.Context, admin *pgxpool.Pool, name string) (bool, marker, error) {
	c, err := admin.Acquire(ctx)
	if err != nil {
		return false, marker{}, fmt.Errorf("connecting as admin: %w", err)
	}
	defer c.Release()
	return roleState(ctx, c.Conn(), name)
}
