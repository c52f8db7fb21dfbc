package memory

import (
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/write"
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
	// jobCursors is "schema"."job_cursors" (where decay's walk stopped).
	jobCursors string
	access     string // "schema"."memory_access"
	// columns are the memory columns with the access statistics read from
	// access (write.Columns).
	columns string
	// insertColumns are the memory columns of a row just inserted
	// (write.InsertColumns).
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
		jobCursors:     pgx.Identifier{schema, "job_cursors"}.Sanitize(),
		access:         pgx.Identifier{schema, "memory_access"}.Sanitize(),
		sessions:       pgx.Identifier{schema, "sessions"}.Sanitize(),
		messages:       pgx.Identifier{schema, "messages"}.Sanitize(),
		summaries:      pgx.Identifier{schema, "summaries"}.Sanitize(),
		summarySources: pgx.Identifier{schema, "summary_sources"}.Sanitize(),
		episodes:       pgx.Identifier{schema, "episodes"}.Sanitize(),
		documents:      pgx.Identifier{schema, "documents"}.Sanitize(),
		docChanges:     pgx.Identifier{schema, "document_changes"}.Sanitize(),
	}
	q.columns, q.insertColumns = write.Columns(q.access), write.InsertColumns()
	return q
}

// scanMemory scans the memory columns, then extra destinations (write.ScanMemory).
func scanMemory(row pgx.Row, extra ...any) (Memory, error) { return write.ScanMemory(row, extra...) }

// decayExpr is the decay score of row m at query time (write.DecayExpr).
func (q queries) decayExpr(names, seconds string) string {
	return write.DecayExpr(q.access, names, seconds)
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
