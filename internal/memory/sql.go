package memory

import (
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
)

// queries holds the quoted table names of one tenant schema; identifiers
// are quoted by pgx, never built from user input.
type queries struct {
	memories   string // "schema"."memories"
	history    string // "schema"."memory_history"
	ownerLocks string // "schema"."owner_locks"
	jobLocks   string // "schema"."job_locks"
	// compactState is "schema"."compaction_state".
	compactState string
	access       string // "schema"."memory_access"
	// columns are memoryColumns with the access statistics read from access.
	columns string
	// insertColumns are memoryColumns of a row just inserted, which has no
	// access statistics yet: the same values as columns without its
	// subqueries, which Citus refuses in an INSERT's RETURNING.
	insertColumns string
	// Conversations: "schema"."sessions", "messages", "summaries", "summary_sources".
	sessions, messages, summaries, summarySources string
	// Long-term memory: "schema"."episodes", "documents", "document_changes".
	episodes, documents, docChanges string
}

func newQueries(schema string) queries {
	q := queries{
		memories:       pgx.Identifier{schema, "memories"}.Sanitize(),
		history:        pgx.Identifier{schema, "memory_history"}.Sanitize(),
		ownerLocks:     pgx.Identifier{schema, "owner_locks"}.Sanitize(),
		jobLocks:       pgx.Identifier{schema, "job_locks"}.Sanitize(),
		compactState:   pgx.Identifier{schema, "compaction_state"}.Sanitize(),
		access:         pgx.Identifier{schema, "memory_access"}.Sanitize(),
		sessions:       pgx.Identifier{schema, "sessions"}.Sanitize(),
		messages:       pgx.Identifier{schema, "messages"}.Sanitize(),
		summaries:      pgx.Identifier{schema, "summaries"}.Sanitize(),
		summarySources: pgx.Identifier{schema, "summary_sources"}.Sanitize(),
		episodes:       pgx.Identifier{schema, "episodes"}.Sanitize(),
		documents:      pgx.Identifier{schema, "documents"}.Sanitize(),
		docChanges:     pgx.Identifier{schema, "document_changes"}.Sanitize(),
	}
	q.columns = strings.NewReplacer("$LAST", q.lastAccess(), "$COUNT", `coalesce((SELECT a.access_count FROM `+q.access+` AS a WHERE a.memory_id = m.id), 0)`).Replace(memoryColumns)
	q.insertColumns = strings.NewReplacer("$LAST", "NULL::timestamptz", "$COUNT", "0::bigint").Replace(memoryColumns)
	return q
}

// lastAccess is the last access of row m (NULL: never returned).
func (q queries) lastAccess() string {
	return `(SELECT a.last_accessed_at FROM ` + q.access + ` AS a WHERE a.memory_id = m.id)`
}

// memoryColumns are selected (with alias m) wherever a Memory is returned,
// as queries.columns (the access statistics come from the memory_access
// table, $LAST and $COUNT); scanMemory reads them in this order.
const memoryColumns = `m.id::text, m.owner_id, m.agent_id, m.session_id, m.source_session, m.source, m.category, m.content,
	m.importance, m.flags, m.active, m.superseded_by::text, m.expires_at, m.created_at, m.updated_at,
	$LAST, $COUNT`

// scanMemory scans memoryColumns, then extra destinations.
func scanMemory(row pgx.Row, extra ...any) (Memory, error) {
	var m Memory
	var superseded *string
	var src string
	dest := []any{&m.ID, &m.Owner, &m.Agent, &m.Session, &m.SourceSession, &src, &m.Category, &m.Content,
		&m.Importance, &m.Flags, &m.Active, &superseded, &m.ExpiresAt, &m.CreatedAt, &m.UpdatedAt,
		&m.LastAccessedAt, &m.AccessCount}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return Memory{}, err
	}
	m.Source = Source(src)
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

// decayExpr is the decay score of row m at query time:
// exp(-ln2 / halfLife * age), age counted from the later of the last write
// and the last access; 1 for categories without a half-life (or unknown to
// the policy). names and seconds are the placeholders of two array
// parameters: the category names and their half-lives in seconds. An array
// lookup keeps it a plain per-row expression (no subquery per row).
func (q queries) decayExpr(names, seconds string) string {
	halfLife := strings.NewReplacer("$N", names, "$S", seconds).Replace(`($S::float8[])[array_position($N::text[], m.category)]`)
	// greatest(-700, ...) keeps exp() above float8's underflow, which
	// PostgreSQL reports as an error rather than rounding to 0. date_part,
	// not extract: extract returns numeric, and numeric arithmetic on every
	// row of an owner was a measurable part of context's query (issue 17).
	return `CASE WHEN ` + halfLife + ` > 0 THEN exp(greatest(-700, -0.6931471805599453 / ` + halfLife + ` *
		greatest(date_part('epoch', now() - greatest(m.updated_at, coalesce(` + q.lastAccess() + `, m.updated_at))), 0))) ELSE 1 END`
}

// scopeFilter narrows a query on alias m to an agent and a session: the
// memories of that agent (session) plus the owner's memories that belong
// to none. Parameters are added to a only when used.
func scopeFilter(a *core.Args, agent, session string) string {
	var b strings.Builder
	if agent != "" {
		b.WriteString(" AND m.agent_id IN ('', " + a.Add(agent) + ")")
	}
	if session != "" {
		b.WriteString(" AND m.session_id IN ('', " + a.Add(session) + ")")
	}
	return b.String()
}
