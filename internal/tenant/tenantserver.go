package tenant

import "github.com/jackc/pgx/v5"

// What a connection to a server a tenant names (its connectionSecretRef)
// may make the operator keep. MaxServerMessage (8 MiB) is one pgx read
// buffer, which a connection keeps while idle (pgx's chunk reader keeps
// the buffer of the last large message until the next read): the pools
// of tenants' Secrets and the node runners' tenant-run nodes summed to
// hundreds of MiB at worst, against the operator's 512Mi limit. The
// operator's honest messages from such a server are far smaller: a row
// of the watchdog's marked roles is under 1.2 KiB (a name of 63 bytes, a
// marker of 1,024), the advisory-lock functions' array under 2 KiB, an
// error a few KiB; the operator reads no query text there. Measured on a
// real PostgreSQL 17 with 10,000 marked roles (three provisionings, a
// drop, a watchdog's look): the largest message was a row or notice of
// 741 bytes, the largest row description 117 bytes.
const (
	// MaxTenantServerMessage bounds one message from a tenant's server.
	MaxTenantServerMessage = 256 << 10
	// MaxTenantServerAnswer bounds one answer from a tenant's server
	// (MaxServerAnswer, 32 MiB, for the platform's): up to 40 such
	// connections read an answer at once (the node runners' two per
	// followed node, the running passes' and their blocker watches'), and
	// a list the operator collects may keep it whole until the look ends.
	// The largest honest one is the watchdog's 1,000 roles
	// (MaxTenantWatchedRoles), about 1.2 MiB at the longest markers.
	MaxTenantServerAnswer = 4 << 20
	// tenantSmallMessage bounds, on such a connection, a row description,
	// a ParameterDescription (both kept in pgx's statement cache) and the
	// other small messages: the operator's widest row description is
	// 117 bytes, its largest authentication message 88.
	tenantSmallMessage = 4 << 10
	// tenantParameterStatus bounds one ParameterStatus (an honest one is
	// under a few hundred bytes).
	tenantParameterStatus = 1 << 10
	// TenantStatementCache is the capacity of pgx's statement and
	// description caches on such a connection (512 by default): every
	// distinct statement text enters them with its descriptions, and the
	// operator's texts name each tenant's schema and roles, so a pooled
	// connection serving many tenants filled all 512. Three provisionings
	// and a drop prepared 35 distinct texts, one provisioning fewer than
	// 27: a pass fits, and a text evicted is prepared again.
	TenantStatementCache = 32
)

// tenantLimits: a connection to a server a tenant names.
var tenantLimits = &messageLimits{message: MaxTenantServerMessage, answer: MaxTenantServerAnswer, parameterStatus: tenantParameterStatus,
	rowDescription: tenantSmallMessage, small: tenantSmallMessage}

// BoundTenantServer bounds cfg, a connection to a server a tenant names,
// as BoundMessages does with the smaller limits above. The platform
// team's connections keep BoundMessages's.
func BoundTenantServer(cfg *pgx.ConnConfig) {
	boundWith(&cfg.Config, tenantLimits)
	cfg.StatementCacheCapacity = TenantStatementCache
	cfg.DescriptionCacheCapacity = TenantStatementCache
}
