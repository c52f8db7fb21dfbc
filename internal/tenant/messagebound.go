package tenant

import "github.com/jackc/pgx/v5/pgconn"

// MaxServerMessage bounds one protocol message the operator reads from a
// PostgreSQL server. pgx reads a message body whole, up to 1 GiB by
// default, before looking at it, and a connectionSecretRef may name a
// server the tenant runs: its first answer of 900 MiB held 904 MiB of the
// operator's heap (limit 512Mi) after 21 ms (issue 26's sixth review,
// HIGH 1). Nothing the operator reads comes near it: catalog rows, markers
// (maxMarkerBytesSQL), notices, errors and pg_stat_activity's query text
// (track_activity_query_size, at most 1 MiB).
const MaxServerMessage = 8 << 20

// BoundMessages sets MaxServerMessage on cfg (its fallbacks connect with
// it too).
func BoundMessages(cfg *pgconn.Config) {
	cfg.MaxProtocolMessageBodyLen = MaxServerMessage
}
