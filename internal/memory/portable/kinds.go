package portable

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// kindSpec is how one record kind is read from its table: the row source,
// the column that holds the owner, the keyset key (columns and their SQL
// types), the JSON object of a line (built by PostgreSQL, so a line is
// exactly what the row holds) and the column of its vector, if any.
type kindSpec struct {
	kind     string
	from     string // "schema"."table" AS alias [JOIN ...]
	ownerCol string
	keyCols  []string
	keyTypes []string
	fields   string // json_build_object arguments after kind and owner
	vector   string // column of the embedding, "" when the kind has none
}

// specs returns the kinds of schema, in export order (RecordKinds).
func specs(schema string) []kindSpec {
	t := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	return []kindSpec{
		{kind: KindSession, from: t("sessions") + ` AS x`, ownerCol: `x.owner_id`,
			keyCols: []string{`x.id`}, keyTypes: []string{`text`},
			fields: `'id', x.id, 'agentId', x.agent_id, 'title', x.title, 'archived', x.archived,
				'createdAt', x.created_at, 'lastActiveAt', x.last_active_at, 'endedAt', x.ended_at,
				'messageCount', x.message_count, 'tokenCount', x.token_count, 'nextSeq', x.next_seq,
				'summarizedThrough', x.summarized_through, 'summarizedTokens', x.summarized_tokens,
				'summaryCount', x.summary_count, 'extractedThrough', x.extracted_through,
				'profileVersion', x.profile_version, 'constraintsVersion', x.constraints_version`},
		{kind: KindMessage, from: t("messages") + ` AS x`, ownerCol: `x.owner_id`,
			keyCols: []string{`x.session_id`, `x.seq`}, keyTypes: []string{`text`, `bigint`},
			fields: `'sessionId', x.session_id, 'seq', x.seq, 'role', x.role, 'source', x.source,
				'content', x.content, 'toolName', x.tool_name, 'toolCallId', x.tool_call_id,
				'tokens', x.tokens, 'flags', x.flags, 'createdAt', x.created_at`,
			vector: `x.embedding`},
		{kind: KindSummary, from: t("summaries") + ` AS x`, ownerCol: `x.owner_id`,
			keyCols: []string{`x.id`}, keyTypes: []string{`uuid`},
			fields: `'id', x.id, 'sessionId', x.session_id, 'depth', x.depth, 'content', x.content,
				'expandHint', x.expand_hint, 'earliestSeq', x.earliest_seq, 'latestSeq', x.latest_seq,
				'earliestAt', x.earliest_at, 'latestAt', x.latest_at, 'tokens', x.tokens,
				'descendantCount', x.descendant_count, 'method', x.method, 'parentId', x.parent_id,
				'createdAt', x.created_at`,
			vector: `x.embedding`},
		{kind: KindSummarySource, from: t("summary_sources") + ` AS x JOIN ` + t("summaries") + ` AS p ON p.id = x.summary_id`,
			ownerCol: `p.owner_id`, keyCols: []string{`x.summary_id`, `x.ord`}, keyTypes: []string{`uuid`, `integer`},
			fields: `'summaryId', x.summary_id, 'ord', x.ord, 'childId', x.child_id, 'fromSeq', x.from_seq, 'toSeq', x.to_seq`},
		{kind: KindEpisode, from: t("episodes") + ` AS x`, ownerCol: `x.owner_id`,
			keyCols: []string{`x.id`}, keyTypes: []string{`uuid`},
			fields: `'id', x.id, 'sessionId', x.session_id, 'agentId', x.agent_id, 'summary', x.summary,
				'method', x.method, 'userTurns', x.user_turns, 'startedAt', x.started_at, 'endedAt', x.ended_at,
				'createdAt', x.created_at`,
			vector: `x.embedding`},
		{kind: KindDocument, from: t("documents") + ` AS x`, ownerCol: `x.owner_id`,
			keyCols: []string{`x.agent_id`, `x.kind`}, keyTypes: []string{`text`, `text`},
			fields: `'agentId', x.agent_id, 'type', x.kind, 'version', x.version, 'content', x.content,
				'source', x.source, 'updatedAt', x.updated_at`},
		{kind: KindDocumentChange, from: t("document_changes") + ` AS x`, ownerCol: `x.owner_id`,
			keyCols: []string{`x.id`}, keyTypes: []string{`bigint`},
			fields: `'agentId', x.agent_id, 'type', x.kind, 'version', x.version, 'source', x.source,
				'actorId', x.actor_id, 'before', x.before, 'after', x.after, 'createdAt', x.created_at`},
		{kind: KindMemory, from: t("memories") + ` AS x LEFT JOIN ` + t("memory_access") + ` AS a ON a.memory_id = x.id`,
			ownerCol: `x.owner_id`, keyCols: []string{`x.id`}, keyTypes: []string{`uuid`},
			fields: `'id', x.id, 'agentId', x.agent_id, 'sessionId', x.session_id, 'sourceSession', x.source_session,
				'source', x.source, 'category', x.category, 'content', x.content, 'importance', x.importance,
				'flags', x.flags, 'metadata', x.metadata, 'tags', x.tags,
				'active', x.active, 'supersededBy', x.superseded_by, 'expiresAt', x.expires_at,
				'createdAt', x.created_at, 'updatedAt', x.updated_at, 'deactivatedAt', x.deactivated_at,
				'accessCount', x.access_count, 'lastAccessedAt', x.last_accessed_at,
				'access', CASE WHEN a.memory_id IS NULL THEN NULL
					ELSE json_build_object('count', a.access_count, 'lastAccessedAt', a.last_accessed_at) END`,
			vector: `x.embedding`},
		{kind: KindHistory, from: t("memory_history") + ` AS x`, ownerCol: `x.owner_id`,
			keyCols: []string{`x.id`}, keyTypes: []string{`bigint`},
			fields: `'memoryId', x.memory_id, 'action', x.action, 'actor', x.actor, 'actorId', x.actor_id,
				'oldContent', x.old_content, 'newContent', x.new_content, 'details', x.details, 'createdAt', x.created_at`},
	}
}

// pageSQL is the keyset query of one page of k's rows of owner $1 after
// the key in $2.. (none: from the start), at most limit rows: the key
// columns as text, then the line.
func (k *kindSpec) pageSQL(afterKey bool, vectors bool, limit int) string {
	var b strings.Builder
	b.WriteString(`SELECT `)
	for _, c := range k.keyCols {
		b.WriteString(c + `::text, `)
	}
	b.WriteString(`json_build_object('kind', '` + k.kind + `', 'owner', ` + k.ownerCol + `, ` + k.fields)
	if vectors && k.vector != "" {
		// pgvector's text form "[1,2,3]" is a JSON array.
		b.WriteString(`, 'embedding', ` + k.vector + `::text::json`)
	}
	b.WriteString(`)::text FROM ` + k.from + ` WHERE ` + k.ownerCol + ` = $1`)
	if afterKey {
		b.WriteString(` AND (` + strings.Join(k.keyCols, `, `) + `) > (`)
		for i, typ := range k.keyTypes {
			if i > 0 {
				b.WriteString(`, `)
			}
			b.WriteString(`$` + itoa(i+2) + `::` + typ)
		}
		b.WriteString(`)`)
	}
	b.WriteString(` ORDER BY ` + strings.Join(k.keyCols, `, `) + ` LIMIT ` + itoa(limit))
	return b.String()
}

// countSQL counts k's rows of owner $1, or of the tenant when all.
func (k *kindSpec) countSQL(all bool) string {
	if all {
		return `SELECT count(*) FROM ` + k.from
	}
	return `SELECT count(*) FROM ` + k.from + ` WHERE ` + k.ownerCol + ` = $1`
}
