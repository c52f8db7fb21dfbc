package tenant

import (
	"context"
	"fmt"
	"strconv"
)

// Bounds of the watchdog's read of the marked roles. An operator's marker
// is under 512 bytes (a UID, a namespace and a name, the quarantine
// fields); a longer one is not the operator's and is not watched. Past
// maxWatchedRoles roles (by OID, the oldest first), the newer ones are not
// watched either: a server with that many runtimes needs a second server
// first. A role name is a PostgreSQL name (maxRoleNameBytes at most).
//
// The statement's LIMIT and length test bind an honest server only. The
// watchdog also looks at servers a tenant runs, and what it reads it keeps
// until the next look, for as long as the operator follows the node: 16
// nodes of one such server answering with 7 MiB markers kept 540 MiB
// (issue 26's eighth review, HIGH 1 c). So markedRoles applies the same
// bounds to what it keeps, whatever the server sends.
const (
	maxMarkerBytes   = 1024
	maxWatchedRoles  = 10000
	maxRoleNameBytes = 63
)

// MaxTenantWatchedRoles is LockPolicy.MaxRoles for a server a tenant runs:
// its honest marked roles are its own namespace's runtimes (at most
// maxNamespaceRoles, which provisioning enforces), and each node of such
// a server kept up to 10,000 roles, about 10 MiB, between looks.
const MaxTenantWatchedRoles = maxNamespaceRoles

// rolesSQL lists the tenants' login roles with their markers, within the
// bounds above (which markedRoles applies again on the client).
var rolesSQL = `SELECT r.oid, r.rolname, r.rolconnlimit, shobj_description(r.oid, 'pg_authid')
		FROM pg_roles r
		WHERE r.rolcanlogin AND NOT r.rolsuper AND r.rolname <> current_user
			AND shobj_description(r.oid, 'pg_authid') LIKE 'managed-by=engram%'
			AND octet_length(shobj_description(r.oid, 'pg_authid')) <= ` + strconv.Itoa(maxMarkerBytes) + `
		ORDER BY r.oid LIMIT $1::int`

// markedRoles reads the tenants' login roles. It stops at the policy's
// MaxRoles rows and skips a row whose name or marker is longer than a
// server of the operator's could hold, before copying anything of it:
// what it returns is at most MaxRoles × (maxRoleNameBytes +
// maxMarkerBytes) bytes of text (about 10 MiB at 10,000 roles, 1 MiB at
// MaxTenantWatchedRoles), whatever the server answered.
func (w *LockWatchdog) markedRoles(ctx context.Context) (map[uint32]watchedRole, error) {
	rows, err := w.conn.Query(ctx, rolesSQL, w.policy.MaxRoles)
	if err != nil {
		return nil, fmt.Errorf("listing the tenants' login roles: %w", err)
	}
	defer rows.Close()
	roles := map[uint32]watchedRole{}
	for n := 0; n < w.policy.MaxRoles && rows.Next(); n++ {
		raw := rows.RawValues()
		if len(raw) != 4 || len(raw[1]) > maxRoleNameBytes || len(raw[3]) > maxMarkerBytes {
			continue // not a role of the operator's: not watched, not kept
		}
		var oid uint32
		var r watchedRole
		var comment *string
		if err := rows.Scan(&oid, &r.name, &r.limit, &comment); err != nil {
			return nil, fmt.Errorf("listing the tenants' login roles: %w", err)
		}
		if m := parseMarker(comment); m.managed && m.uid != "" {
			r.owner, r.comment, r.mark = markedOwner(m), *comment, m.quarantine
			roles[oid] = r
		}
	}
	// Past the limit, Close reads the rest of the answer (bounded by
	// MaxServerAnswer) and keeps none of it.
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing the tenants' login roles: %w", err)
	}
	return roles, nil
}
