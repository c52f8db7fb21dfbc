package tenant

import (
	"strings"

	"github.com/engram-dev/engram/internal/naming"
)

// MaxIdentifierBytes is PostgreSQL's identifier limit (NAMEDATALEN - 1).
const MaxIdentifierBytes = 63

// MaxSchemaBytes is the longest schema name Engram derives or accepts in a
// spec: its role names ("_owner", "_app") are never cut and at most 62
// bytes. A cut role name ends in a hash of its schema (fitIdentifier) and is
// exactly 63 bytes; another schema could be chosen to have that very name
// uncut, taking the role away from the tenant whose name was cut. Only
// schemas of earlier releases are longer, and no schema of at most 56
// bytes can produce a 63-byte role name.
const MaxSchemaBytes = MaxIdentifierBytes - len("_owner") - 1

// ControlSchema holds the operator's own bookkeeping (provisioning locks).
// It is not a tenant: no runtime may name it.
const ControlSchema = "engram_control"

// SchemaName derives the default schema of a tenant from its namespace and
// name: "engram_<namespace>_<name>_<hash>", lower-cased, every character
// other than [a-z0-9_] replaced by "_", and the first 8 hex digits of
// SHA-256("<namespace>/<name>") at the end, at most MaxSchemaBytes.
//
// The readable part alone is not injective ("team"/"a-bot" and
// "team-a"/"bot" both read team_a_bot); the hash of the exact pair is what
// keeps two runtimes apart. When the name must be cut to 63 bytes the hash
// grows to 16 hex digits, because the cut part no longer constrains the
// input. Names are a convenience, not the proof of ownership: that is the
// UID marker (see ownership.go). The "engram_" prefix is reserved for these
// names: spec.database.schema may not use it (CRD validation), so no tenant
// can claim another's default name before that tenant exists.
func SchemaName(namespace, name string) string {
	pair := namespace + "/" + name
	base := "engram_" + sanitize(namespace) + "_" + sanitize(name)
	tag := "_" + naming.ShortHash(pair, 4)
	if len(base)+len(tag) <= MaxSchemaBytes {
		return base + tag
	}
	tag = "_" + naming.ShortHash(pair, 8)
	return strings.TrimRight(base[:MaxSchemaBytes-len(tag)], "_") + tag
}

// LegacySchemaName is the default schema name of Engram releases before
// the UID marker ("engram_<namespace>_<name>", not injective). It is kept
// only so tests and docs can show the upgrade path.
func LegacySchemaName(namespace, name string) string {
	return fitIdentifier("engram_"+sanitize(namespace)+"_"+sanitize(name), "")
}

// OwnerRole is the NOLOGIN role that owns the schema and its objects.
func OwnerRole(schema string) string { return fitIdentifier(schema, "_owner") }

// LoginRole is the LOGIN role the memory service and jobs connect as.
func LoginRole(schema string) string { return fitIdentifier(schema, "_app") }

// ValidSchemaName reports whether s can be used as a tenant schema name as is.
func ValidSchemaName(s string) bool {
	if s == "" || len(s) > MaxIdentifierBytes || strings.HasPrefix(s, "pg_") ||
		s == "public" || s == "information_schema" || s == ControlSchema {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r == '_':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// fitIdentifier returns base+suffix, or, when that exceeds 63 bytes, base cut
// short followed by "_" and 8 hex digits of a hash of base, then suffix.
func fitIdentifier(base, suffix string) string {
	return naming.Fit(base, MaxIdentifierBytes-len(suffix), "_", "") + suffix
}
