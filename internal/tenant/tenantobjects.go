package tenant

// The tenant's schema and roles: provisioning claims each (by its ownership
// marker), then creates, keeps or re-marks it.

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// tenantPlan is what provisioning does with the schema and each role.
type tenantPlan struct {
	schema, owner, login claimAction
	// frozen: the schema is frozen for a move (relocate_freeze.go); its
	// grants stay revoked until the move's Unfreeze.
	frozen bool
}

// claimTenant reads the ownership markers of the schema and both roles and
// decides, for each, whether to create, keep or re-mark it. Any object owned
// by another runtime, or by nobody, refuses the whole tenant.
func claimTenant(ctx context.Context, conn *pgx.Conn, spec Spec, names roleNames) (tenantPlan, error) {
	var plan tenantPlan
	exists, m, err := schemaState(ctx, conn, spec.Schema)
	if err != nil {
		return plan, err
	}
	if plan.schema, err = decideClaim(exists, m, spec.Owner, spec.Claim, "schema", spec.Schema, false); err != nil {
		return plan, err
	}
	plan.frozen = m.frozen
	// A legacy role carries no runtime; it may follow a schema that is this
	// runtime's by the legacy rule, or that is already this runtime's.
	schemaOK := plan.schema == claimOurs || plan.schema == claimRemark
	for _, r := range []struct {
		name string
		to   *claimAction
	}{{names.owner, &plan.owner}, {names.login, &plan.login}} {
		exists, m, err := roleState(ctx, conn, r.name)
		if err != nil {
			return plan, err
		}
		if *r.to, err = decideClaim(exists, m, spec.Owner, spec.Claim, "role", r.name, schemaOK); err != nil {
			return plan, err
		}
	}
	return plan, nil
}

// ensureRoles creates the owner (NOLOGIN) and login roles when missing,
// re-marks legacy or adopted ones, and lets the admin act as the owner
// (needed to create objects it owns). On Citus the owner role may log in
// but has no password (see ownerLogin). after is Spec.after.
func ensureRoles(ctx context.Context, conn *pgx.Conn, owner Owner, names roleNames, plan tenantPlan, citus bool, after func(string) error, res *Result) error {
	for _, r := range []struct {
		name   string
		login  bool
		action claimAction
	}{{names.owner, false, plan.owner}, {names.login, true, plan.login}} {
		ident := pgx.Identifier{r.name}.Sanitize()
		switch r.action {
		case claimOurs:
			continue
		case claimRemark:
			if _, err := conn.Exec(ctx, "COMMENT ON ROLE "+ident+" IS "+quoteLiteral(owner.marker())); err != nil {
				return fmt.Errorf("marking role %q: %w", r.name, err)
			}
			res.Changes = append(res.Changes, "marked role "+r.name+" as owned by UID "+owner.UID)
			continue
		}
		pw, err := createMarkedRole(ctx, conn, r.name, r.login, citus, owner.marker(), after)
		if err != nil {
			return err
		}
		if r.login {
			res.Password = pw
		}
		res.Changes = append(res.Changes, "created role "+r.name)
	}
	if citus {
		if err := ownerLogin(ctx, conn, names.owner, res); err != nil {
			return err
		}
	}
	// The admin creates the tenant's objects as the owner role (SET ROLE)
	// and grants on them (it needs the owner's privileges). From
	// PostgreSQL 16 on, a CREATEROLE admin is a member of every role it
	// created, but with ADMIN only (no SET, no INHERIT): it grants itself
	// the role once more to get both.
	var member, super bool
	if err := conn.QueryRow(ctx, `SELECT CASE WHEN current_setting('server_version_num')::int >= 160000
			THEN pg_has_role(current_user, $1, 'USAGE') AND pg_has_role(current_user, $1, 'SET')
			ELSE pg_has_role(current_user, $1, 'MEMBER') END, rolsuper
		FROM pg_roles WHERE rolname = current_user`, names.owner).Scan(&member, &super); err != nil {
		return fmt.Errorf("checking membership in %q: %w", names.owner, err)
	}
	if !member && !super {
		if _, err := conn.Exec(ctx, "GRANT "+pgx.Identifier{names.owner}.Sanitize()+" TO CURRENT_USER"); err != nil {
			return fmt.Errorf("granting %q to the admin role: %w", names.owner, err)
		}
		res.Changes = append(res.Changes, "granted "+names.owner+" to the admin role")
	}
	return nil
}

// createMarkedRole creates one role and writes its marker in one
// transaction, and returns the login role's new password. Two statements
// on their own left an unmarked role when the pass ended between them (a
// cancelled context, an operator shut down): every later pass then found
// a role Engram cannot prove is its own and refused the runtime for good
// (hostile review 17). after is Spec.after: the admission tests pause a
// pass right after a login role's CREATE, in the window where its OID is
// taken but no concurrent pass can count it yet.
func createMarkedRole(ctx context.Context, conn *pgx.Conn, name string, login, citus bool, marker string, after func(string) error) (password string, err error) {
	ident := pgx.Identifier{name}.Sanitize()
	stmt := "CREATE ROLE " + ident + " NOLOGIN NOINHERIT"
	if citus {
		stmt = "CREATE ROLE " + ident + " LOGIN NOINHERIT"
	}
	if login {
		if password, err = newPassword(); err != nil {
			return "", err
		}
		verifier, err := scramVerifier(password)
		if err != nil {
			return "", err
		}
		stmt = "CREATE ROLE " + ident + " LOGIN NOINHERIT PASSWORD " + quoteLiteral(verifier)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("creating role %q: %w", name, err)
		}
		if login || citus {
			if err := after("login role created, not marked"); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident+" IS "+quoteLiteral(marker)); err != nil {
			return fmt.Errorf("marking role %q: %w", name, err)
		}
		return nil
	})
	return password, err
}

func roleState(ctx context.Context, conn *pgx.Conn, name string) (bool, marker, error) {
	return catalogMarker(ctx, conn, "role", `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, name)
}

// ensureSchema creates the schema owned by the owner role, or re-marks a
// legacy or adopted one.
func ensureSchema(ctx context.Context, conn *pgx.Conn, spec Spec, names roleNames, plan tenantPlan, res *Result) error {
	ident := pgx.Identifier{spec.Schema}.Sanitize()
	mark := spec.Owner.marker()
	if spec.Claim.incoming {
		mark = spec.Owner.relocateMarker(relocateIncoming, false, "") // created as a move's target
	}
	comment := "COMMENT ON SCHEMA " + ident + " IS " + quoteLiteral(mark)
	switch plan.schema {
	case claimOurs:
		return nil
	case claimRemark:
		if _, err := conn.Exec(ctx, comment); err != nil {
			return fmt.Errorf("marking schema %q: %w", spec.Schema, err)
		}
		res.Changes = append(res.Changes, "marked schema "+spec.Schema+" as owned by UID "+spec.Owner.UID)
		return nil
	}
	stmts := []string{
		"CREATE SCHEMA " + ident + " AUTHORIZATION " + pgx.Identifier{names.owner}.Sanitize(),
		comment,
		"REVOKE ALL ON SCHEMA " + ident + " FROM PUBLIC",
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("creating schema %q: %w", spec.Schema, err)
		}
	}
	res.Changes = append(res.Changes, "created schema "+spec.Schema)
	return nil
}

func schemaState(ctx context.Context, conn *pgx.Conn, schema string) (bool, marker, error) {
	return catalogMarker(ctx, conn, "schema", `SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = $1`, schema)
}

// catalogMarker reports whether the catalog object named name (a kind,
// said in errors) exists, by query (its comment, by name), and its
// ownership marker.
func catalogMarker(ctx context.Context, conn *pgx.Conn, kind, query, name string) (bool, marker, error) {
	var comment *string
	err := conn.QueryRow(ctx, query, name).Scan(&comment)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, marker{}, nil
	}
	if err != nil {
		return false, marker{}, fmt.Errorf("reading %s %q: %w", kind, name, err)
	}
	return true, parseMarker(comment), nil
}
