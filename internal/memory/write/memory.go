package write

import (
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
)

// memoryColumns are selected (with alias m) wherever a Memory is returned,
// as Columns (the access statistics come from the memory_access table,
// $LAST and $COUNT); ScanMemory reads them in this order.
const memoryColumns = `m.id::text, m.owner_id, m.agent_id, m.session_id, m.source_session, m.source, m.category, m.content,
	m.importance, m.flags, m.active, m.superseded_by::text, m.expires_at, m.created_at, m.updated_at,
	$LAST, $COUNT, m.metadata, m.tags`

// Columns are memoryColumns with the access statistics read from access
// (the quoted memory_access table).
func Columns(access string) string {
	return strings.NewReplacer("$LAST", LastAccess(access), "$COUNT", `coalesce((SELECT a.access_count FROM `+access+` AS a WHERE a.memory_id = m.id), 0)`).Replace(memoryColumns)
}

// InsertColumns are memoryColumns of a row just inserted, which has no
// access statistics yet: the same values as Columns without its
// subqueries, which Citus refuses in an INSERT's RETURNING.
func InsertColumns() string {
	return strings.NewReplacer("$LAST", "NULL::timestamptz", "$COUNT", "0::bigint").Replace(memoryColumns)
}

// LastAccess is the last access of row m (NULL: never returned), access
// the quoted memory_access table.
func LastAccess(access string) string {
	return `(SELECT a.last_accessed_at FROM ` + access + ` AS a WHERE a.memory_id = m.id)`
}

// ScanMemory scans Columns, then extra destinations.
func ScanMemory(row pgx.Row, extra ...any) (Memory, error) {
	return scanMemory(row, true, extra...)
}

// scanMemory scans Columns, without metadata and tags unless labels (the
// columns of Citus's add_memory of migration 15, which predates them: its
// rows have none), then extra destinations.
func scanMemory(row pgx.Row, labels bool, extra ...any) (Memory, error) {
	var m Memory
	var superseded *string
	var src string
	var metadata []byte
	dest := []any{&m.ID, &m.Owner, &m.Agent, &m.Session, &m.SourceSession, &src, &m.Category, &m.Content,
		&m.Importance, &m.Flags, &m.Active, &superseded, &m.ExpiresAt, &m.CreatedAt, &m.UpdatedAt,
		&m.LastAccessedAt, &m.AccessCount}
	if labels {
		dest = append(dest, &metadata, &m.Tags)
	}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return Memory{}, err
	}
	if len(metadata) > 0 && string(metadata) != "{}" {
		m.Metadata = metadata
	}
	if len(m.Tags) == 0 {
		m.Tags = nil
	}
	m.Source = core.Source(src)
	if superseded != nil {
		m.SupersededBy = *superseded
	}
	m.CreatedAt, m.UpdatedAt = m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	m.ExpiresAt, m.LastAccessedAt = utcPtr(m.ExpiresAt), utcPtr(m.LastAccessedAt)
	if len(m.Flags) == 0 {
		m.Flags = nil
	}
	return m, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// DecayExpr is the decay score of row m at query time:
// exp(-ln2 / halfLife * age), age counted from the later of the last write
// and the last access (access is the quoted memory_access table); 1 for
// categories without a half-life (or unknown to the policy). names and
// seconds are the placeholders of two array parameters: the category names
// and their half-lives in seconds (DecayParams). An array lookup keeps it
// a plain per-row expression (no subquery per row).
func DecayExpr(access, names, seconds string) string {
	return DecayExprAt("m", `greatest(m.updated_at, coalesce(`+LastAccess(access)+`, m.updated_at))`, names, seconds)
}

// DecayExprAt is DecayExpr's score of a row of alias with the category
// alias.category, counting its age from the timestamp expression at.
// Decay's candidate test gives it updated_at alone: a score never above
// the exact one (a last access only shortens the age).
func DecayExprAt(alias, at, names, seconds string) string {
	halfLife := strings.NewReplacer("$N", names, "$S", seconds, "$A", alias).Replace(`($S::float8[])[array_position($N::text[], $A.category)]`)
	// greatest(-700, ...) keeps exp() above float8's underflow, which
	// PostgreSQL reports as an error rather than rounding to 0. date_part,
	// not extract: extract returns numeric, and numeric arithmetic on every
	// row of an owner was a measurable part of context's query (issue 17).
	return `CASE WHEN ` + halfLife + ` > 0 THEN exp(greatest(-700, -0.6931471805599453 / ` + halfLife + ` *
		greatest(date_part('epoch', now() - ` + at + `), 0))) ELSE 1 END`
}

// JSONBound bounds the JSON of m as an item of an answer (core.Bounded).
func (m Memory) JSONBound() int {
	n := 2*core.ListFixedBound + core.TextBound(m.ID) + core.TextBound(m.Owner) + core.TextBound(m.Agent) + core.TextBound(m.Session) +
		core.TextBound(m.SourceSession) + core.TextBound(string(m.Source)) + core.TextBound(m.Category) + core.TextBound(m.Content) +
		core.TextBound(m.SupersededBy)
	for _, f := range m.Flags {
		n += core.TextBound(f) + 3
	}
	// The metadata is written as it is stored, HTML characters escaped:
	// at most 6 bytes a byte, as a text.
	n += core.TextBound(string(m.Metadata))
	for _, t := range m.Tags {
		n += core.TextBound(t) + 3
	}
	return n
}
