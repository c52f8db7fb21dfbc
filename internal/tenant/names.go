package tenant

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/fnv"
	"strings"
)

// MaxIdentifierBytes is PostgreSQL's identifier limit (NAMEDATALEN - 1).
const MaxIdentifierBytes = 63

// SchemaName derives the default schema of a tenant from its namespace and
// name: "engram_<namespace>_<name>", lower-cased, every character other than
// [a-z0-9_] replaced by "_", and cut to 63 bytes with a hash suffix so two
// long names never collide.
func SchemaName(namespace, name string) string {
	return fitIdentifier("engram_"+sanitize(namespace)+"_"+sanitize(name), "")
}

// OwnerRole is the NOLOGIN role that owns the schema and its objects.
func OwnerRole(schema string) string { return fitIdentifier(schema, "_owner") }

// LoginRole is the LOGIN role the memory service and jobs connect as.
func LoginRole(schema string) string { return fitIdentifier(schema, "_app") }

// ValidSchemaName reports whether s can be used as a tenant schema name as is.
func ValidSchemaName(s string) bool {
	if s == "" || len(s) > MaxIdentifierBytes || strings.HasPrefix(s, "pg_") || s == "public" || s == "information_schema" {
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
	if len(base)+len(suffix) <= MaxIdentifierBytes {
		return base + suffix
	}
	sum := sha256.Sum256([]byte(base))
	tag := "_" + hex.EncodeToString(sum[:4])
	return base[:MaxIdentifierBytes-len(tag)-len(suffix)] + tag + suffix
}

// LockKey returns the two 32-bit keys of a transaction- or session-level
// advisory lock for (scope, name): pg_advisory_lock($1, $2).
func LockKey(scope, name string) (int32, int32) {
	return hash32(scope), hash32(name)
}

func hash32(s string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return int32(h.Sum32())
}
