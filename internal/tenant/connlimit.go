package tenant

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultConnectionShare is the share of the server's connection slots, in
// percent, the login roles of one namespace may hold at once (the operator
// flag --tenant-connection-share).
const DefaultConnectionShare = 25

// ConnectionPolicy sizes the CONNECTION LIMIT of a tenant's login role.
// Without one, a single tenant credential may open every slot the server
// does not reserve for superusers, and then no other tenant, job or
// non-superuser operator can connect (issue 26's third review).
type ConnectionPolicy struct {
	// Share is the percentage of the server's slots (max_connections less
	// the reserved ones) the login roles of one namespace may hold
	// together; zero means DefaultConnectionShare, negative sets no limit
	// (CONNECTION LIMIT -1).
	Share int
	// Need is what the runtime itself opens (replicas × the service's pool
	// size + jobs + a margin). It never raises the limit: replicas is the
	// tenant's to write, and a limit that followed it would reach other
	// tenants' slots (issue 26's fourth review). When it is over the limit,
	// Result.ConnectionShortfall says so.
	Need int
}

// connectionLimit is the limit of each of n login roles of one namespace on
// a server with slots connection slots open to non-superusers: the share
// divided among them, at least 1; -1 means none.
func (p ConnectionPolicy) connectionLimit(slots, n int) int {
	capacity := p.shareCapacity(slots)
	if capacity < 0 {
		return -1
	}
	return max(capacity/max(n, 1), 1)
}

// quarantinedLimit is the CONNECTION LIMIT the lock watchdog sets while a
// role's logins are quarantined; no other limit is ever 0.
const quarantinedLimit = 0

// namespaceRole is a login role of Engram's on the server, marked with the
// runtime of one namespace.
type namespaceRole struct {
	oid   uint32
	name  string
	limit int
	uid   string // of the runtime whose role it is (its marker)
	// quarantined: the marker records a quarantine of the lock watchdog
	// not yet restored.
	quarantined bool
}

// namespaceRolesSQL lists the marked login roles of the server with their
// CONNECTION LIMIT and marker (the namespace is read from the marker in
// Go: the marker is written by the operator, never by the tenant).
const namespaceRolesSQL = `SELECT r.oid, r.rolname, r.rolconnlimit, shobj_description(r.oid, 'pg_authid')
	FROM pg_roles r
	WHERE r.rolcanlogin AND NOT r.rolsuper AND shobj_description(r.oid, 'pg_authid') LIKE 'managed-by=engram%'`

// rolesOfNamespace lists the marked login roles of namespace ns, sorted by
// name; more than maxNamespaceRoles is a *TooManyRowsError (one ALTER ROLE
// each follows).
func rolesOfNamespace(ctx context.Context, conn *pgx.Conn, ns string) ([]namespaceRole, error) {
	rows, err := conn.Query(ctx, namespaceRolesSQL)
	if err != nil {
		return nil, fmt.Errorf("listing the login roles of namespace %q: %w", ns, err)
	}
	var out []namespaceRole
	var r namespaceRole
	var comment *string
	_, err = pgx.ForEachRow(rows, []any{&r.oid, &r.name, &r.limit, &comment}, func() error {
		if m := parseMarker(comment); m.managed && m.uid != "" && markedOwner(m).Namespace == ns {
			if len(out) == maxNamespaceRoles {
				return &TooManyRowsError{What: "login roles of namespace " + ns, Limit: maxNamespaceRoles}
			}
			r.quarantined, r.uid = m.quarantine.active(), m.uid
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the login roles of namespace %q: %w", ns, err)
	}
	slices.SortFunc(out, func(a, b namespaceRole) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// connectionSlots is max_connections less the slots reserved for
// superusers and for pg_use_reserved_connections.
func connectionSlots(ctx context.Context, conn *pgx.Conn) (int, error) {
	var slots int
	// reserved_connections exists from PostgreSQL 16 on; missing_ok gives
	// NULL before.
	err := conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int
			- current_setting('superuser_reserved_connections')::int
			- coalesce(current_setting('reserved_connections', true)::int, 0)`).Scan(&slots)
	if err != nil {
		return 0, fmt.Errorf("reading the connection slots of the server: %w", err)
	}
	return slots, nil
}

// ensureConnectionLimit sets the CONNECTION LIMIT of every login role of
// the owner's namespace on this server to its part of the share, on every
// pass: the runtimes of one namespace together stay within the share
// however many there are, and a changed max_connections or share is
// followed. A role at 0 is in the lock watchdog's quarantine and is left
// alone: the watchdog restores it when the back-off ends. A sibling the
// admin may not alter is a warning, not a failure. res.ConnectionLimit
// records the limit; res.ConnectionShortfall says when the runtime needs
// more.
func ensureConnectionLimit(ctx context.Context, conn *pgx.Conn, p ConnectionPolicy, owner Owner, names roleNames, res *Result) error {
	slots, err := connectionSlots(ctx, conn)
	if err != nil {
		return err
	}
	roles, err := rolesOfNamespace(ctx, conn, owner.Namespace)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(roles, func(r namespaceRole) bool { return r.name == names.login }) {
		// Not marked yet (cannot happen after ensureRoles): count it anyway.
		roles = append(roles, namespaceRole{name: names.login, limit: -2})
	}
	want := p.connectionLimit(slots, len(roles))
	res.ConnectionLimit = want
	own := slices.IndexFunc(roles, func(r namespaceRole) bool { return r.name == names.login })
	if changes := roles[own].limit != want && roles[own].limit != quarantinedLimit; changes && want >= 0 && p.Need > want {
		res.ConnectionShortfall = fmt.Sprintf("this runtime needs up to %d connections (2 × spec.service.replicas × %d of the service's pool, plus the jobs and a margin) "+
			"but its login role %s may open %d: --tenant-connection-share %d %% of the server's %d connection slots, divided among the %d runtime(s) of namespace %s on this server. "+
			"The service's pods meet \"too many connections for role\" beyond it: lower spec.service.replicas, or the platform team raises "+
			"--tenant-connection-share or the server's max_connections",
			p.Need, servicePoolSize, names.login, want, shareOf(p), slots, len(roles), owner.Namespace)
	}
	var others siblingLog
	for _, r := range roles {
		if err := setConnectionLimit(ctx, conn, r, want, r.name == names.login, res, &others); err != nil {
			return err
		}
	}
	res.Changes = others.changes.into(res.Changes, "roles of namespace "+owner.Namespace+" set to "+strconv.Itoa(want))
	res.Warnings = others.warnings.into(res.Warnings, "roles of namespace "+owner.Namespace+" whose connection limit could not be set")
	return nil
}

// siblingLog holds what setConnectionLimit says about the other runtimes'
// roles of the namespace: the first lines and a count.
type siblingLog struct{ changes, warnings lineLog }

// servicePoolSize is the memory service's pool, for the shortfall's
// message (the controller's servicePoolConns).
const servicePoolSize = 10

func shareOf(p ConnectionPolicy) int {
	if p.Share == 0 {
		return DefaultConnectionShare
	}
	return p.Share
}

// setConnectionLimit sets r's limit to want unless it is there already or
// quarantined (a limit of 0, the watchdog's or a DBA's, or a quarantine
// in the marker). An error on another runtime's role is a warning.
func setConnectionLimit(ctx context.Context, conn *pgx.Conn, r namespaceRole, want int, own bool, res *Result, others *siblingLog) error {
	switch {
	case r.limit == want && !r.quarantined:
		return nil
	case r.limit == quarantinedLimit || r.quarantined:
		if own {
			res.Changes = append(res.Changes, fmt.Sprintf("left the connection limit of role %s at %d: the lock watchdog quarantined its logins and restores it, or a DBA shut it out", r.name, r.limit))
		}
		return nil
	}
	stmt := limitUnlessQuarantinedSQL(r.name, want)
	if _, err := conn.Exec(ctx, stmt); err != nil {
		if own {
			return fmt.Errorf("limiting the connections of role %q: %w", r.name, err)
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			others.warnings.add(fmt.Sprintf("could not set the connection limit of role %s, of another runtime of the same namespace, to %d: %v", r.name, want, err))
		}
		return nil // anything else (a concurrent update): the next pass of either runtime sets it
	}
	line := fmt.Sprintf("set the connection limit of role %s to %d (was %d)", r.name, want, r.limit)
	switch {
	case r.limit == -2: // created just now: "created role" says it
	case own:
		res.Changes = append(res.Changes, line)
	default:
		others.changes.add(line)
	}
	return nil
}

// limitUnlessQuarantinedSQL sets the role's CONNECTION LIMIT in one
// statement that checks, as it runs, that the role is neither at 0 nor
// marked quarantined: the lock watchdog may have quarantined it since
// provisioning read the roles, and writing the limit back would lift the
// quarantine for the whole back-off (issue 26's fifth review, MEDIUM 2).
// A quarantine committed while the statement runs makes its ALTER fail
// ("tuple concurrently updated"), never overwrite it.
func limitUnlessQuarantinedSQL(role string, limit int) string {
	return fmt.Sprintf(`DO $engram$BEGIN
	IF EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname = %s AND r.rolconnlimit <> %d
			AND coalesce(pg_catalog.shobj_description(r.oid, 'pg_authid'), '') NOT LIKE %s) THEN
		ALTER ROLE %s CONNECTION LIMIT %d;
	END IF;
END$engram$`, quoteLiteral(role), quarantinedLimit, quoteLiteral("%"+markerQuarantinedUntil+"=%"), pgx.Identifier{role}.Sanitize(), limit)
}
