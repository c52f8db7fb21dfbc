package portable

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/write"
)

// batchRows is how many statements one round trip of an import carries.
const batchRows = 500

// ownerWriter writes one owner's records in its transaction: parents
// first, each row with INSERT ... ON CONFLICT DO NOTHING, so a row the
// tenant holds already is counted as existing and left as it is.
type ownerWriter struct {
	s     *Store
	tx    pgx.Tx
	g     *ownerRecords
	c     *ownerCounts
	batch pgx.Batch
	kinds []string // the kind of each queued statement
	text  *string  // the configuration of stored text vectors (textlocal.go)
	// heldSessions are the sessions the tenant held before this import,
	// heldSummaries the file's summaries of those sessions, heldDocs the
	// documents ("agent type": agent ids hold no space) it held: each is a unit with what hangs
	// from it (messages, summaries and their sources, the episode; the
	// changelog), left whole as the tenant has it, so a session's
	// counters always match its messages and a document its changelog.
	heldSessions, heldSummaries, heldDocs map[string]bool
}

func (w *ownerWriter) t(name string) string { return w.s.core.Table(name) }

func (w *ownerWriter) write(ctx context.Context) error {
	if err := w.held(ctx); err != nil {
		return err
	}
	steps := []func(context.Context) error{w.sessions, w.messages, w.summaries, w.summarySources, w.episodes,
		w.documents, w.documentChanges, w.memories, w.history}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return w.send(ctx)
}

// queue adds one insert of kind; counted when its batch is sent.
func (w *ownerWriter) queue(ctx context.Context, kind, sql string, args ...any) error {
	w.batch.Queue(sql, args...)
	w.kinds = append(w.kinds, kind)
	if w.batch.Len() >= batchRows {
		return w.send(ctx)
	}
	return nil
}

// send runs the queued statements and counts rows inserted and skipped.
func (w *ownerWriter) send(ctx context.Context) error {
	if w.batch.Len() == 0 {
		return nil
	}
	br := w.tx.SendBatch(ctx, &w.batch)
	for _, kind := range w.kinds {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return core.DBErr("writing "+kind+" records", err)
		}
		if kind == "" {
			continue // not a record of its own (a supersede link)
		}
		if tag.RowsAffected() > 0 {
			w.c.inserted[kind]++
		} else {
			w.c.existing[kind]++
		}
	}
	w.batch, w.kinds = pgx.Batch{}, nil
	if err := br.Close(); err != nil {
		return core.DBErr("writing records", err)
	}
	return nil
}

// vec is a record's vector as a parameter (nil: NULL).
func vec(v []float32) any {
	if v == nil {
		return nil
	}
	return pgv.NewVector(v)
}

func flags(f []string) []string {
	if f == nil {
		return []string{}
	}
	return f
}

// held reads which of the file's sessions and documents the tenant holds.
func (w *ownerWriter) held(ctx context.Context) error {
	ids := keysOf(w.g.byKind[KindSession], func(v *sessionRec) string { return v.ID })
	docs := keysOf(w.g.byKind[KindDocument], func(v *documentRec) string { return v.AgentID + " " + v.Type })
	var err error
	if w.heldSessions, err = w.existingIDs(ctx, `SELECT id FROM `+w.t("sessions")+`
		WHERE owner_id = $2 AND id = ANY($1::text[])`, ids, w.g.owner); err != nil {
		return err
	}
	if w.heldDocs, err = w.existingIDs(ctx, `SELECT agent_id || ' ' || kind FROM `+w.t("documents")+`
		WHERE owner_id = $2 AND agent_id || ' ' || kind = ANY($1::text[])`, docs, w.g.owner); err != nil {
		return err
	}
	w.heldSummaries = map[string]bool{}
	for _, r := range w.g.byKind[KindSummary] {
		if v := r.value.(*summaryRec); w.heldSessions[v.SessionID] {
			w.heldSummaries[v.ID] = true
		}
	}
	return nil
}

// keysOf is the key of each record (all of one kind, *T), in file order;
// nil for none.
func keysOf[T any](recs []record, key func(*T) string) []string {
	var keys []string
	for _, r := range recs {
		keys = append(keys, key(r.value.(*T)))
	}
	return keys
}

// insertEach queues sql for each record of kind (*T), with the arguments
// args gives; a record whose unit the tenant holds (held true; nil: none
// is held) is counted as existing instead.
func insertEach[T any](ctx context.Context, w *ownerWriter, kind, sql string, held func(*T) bool, args func(*T) []any) error {
	for _, r := range w.g.byKind[kind] {
		v := r.value.(*T)
		if held != nil && held(v) {
			w.c.existing[kind]++
			continue
		}
		if err := w.queue(ctx, kind, sql, args(v)...); err != nil {
			return err
		}
	}
	return nil
}

func (w *ownerWriter) sessions(ctx context.Context) error {
	return insertEach(ctx, w, KindSession, `INSERT INTO `+w.t("sessions")+` (owner_id, id, agent_id, title, archived,
			created_at, last_active_at, ended_at, message_count, token_count, next_seq, summarized_through,
			summarized_tokens, summary_count, extracted_through, profile_version, constraints_version)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) ON CONFLICT DO NOTHING`,
		nil, func(v *sessionRec) []any {
			return []any{w.g.owner, v.ID, v.AgentID, v.Title, v.Archived, v.CreatedAt, v.LastActiveAt, v.EndedAt, v.MessageCount,
				v.TokenCount, v.NextSeq, v.SummarizedThrough, v.SummarizedTokens, v.SummaryCount, v.ExtractedThrough,
				v.ProfileVersion, v.ConstraintsVersion}
		})
}

func (w *ownerWriter) messages(ctx context.Context) error {
	textConfig, err := w.textConfig(ctx)
	if err != nil {
		return err
	}
	return insertEach(ctx, w, KindMessage, `INSERT INTO `+w.t("messages")+` (owner_id, session_id, seq, role, source,
			content, tool_name, tool_call_id, tokens, flags, embedding, created_at, tsv_config, tsv_local)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, `+core.TextLocal("$13", "$6")+`) ON CONFLICT DO NOTHING`,
		func(v *messageRec) bool { return w.heldSessions[v.SessionID] }, func(v *messageRec) []any {
			return []any{w.g.owner, v.SessionID, v.Seq, v.Role, v.Source, v.Content, v.ToolName, v.ToolCallID, v.Tokens,
				flags(v.Flags), vec(v.Embedding), v.CreatedAt, textConfig}
		})
}

func (w *ownerWriter) summaries(ctx context.Context) error {
	textConfig, err := w.textConfig(ctx)
	if err != nil {
		return err
	}
	return insertEach(ctx, w, KindSummary, `INSERT INTO `+w.t("summaries")+` (id, owner_id, session_id, depth, content,
			expand_hint, earliest_seq, latest_seq, earliest_at, latest_at, tokens, descendant_count, method,
			parent_id, embedding, created_at, tsv_config, tsv_local)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, `+core.TextLocal("$17", "$5")+`) ON CONFLICT DO NOTHING`,
		func(v *summaryRec) bool { return w.heldSessions[v.SessionID] }, func(v *summaryRec) []any {
			return []any{v.ID, w.g.owner, v.SessionID, v.Depth, v.Content, v.ExpandHint, v.EarliestSeq, v.LatestSeq,
				v.EarliestAt, v.LatestAt, v.Tokens, v.DescendantCount, v.Method, v.ParentID, vec(v.Embedding),
				v.CreatedAt, textConfig}
		})
}

// summarySources links only summaries of this owner: a source naming
// another owner's summary is skipped (counted as existing), never written.
func (w *ownerWriter) summarySources(ctx context.Context) error {
	sums := w.t("summaries")
	return insertEach(ctx, w, KindSummarySource, `INSERT INTO `+w.t("summary_sources")+` (summary_id, ord, child_id, from_seq, to_seq)
			SELECT $1, $2, $3, $4, $5
			WHERE EXISTS (SELECT 1 FROM `+sums+` WHERE id = $1 AND owner_id = $6)
			AND ($3::uuid IS NULL OR EXISTS (SELECT 1 FROM `+sums+` WHERE id = $3 AND owner_id = $6))
			ON CONFLICT DO NOTHING`,
		func(v *summarySourceRec) bool { return w.heldSummaries[v.SummaryID] }, func(v *summarySourceRec) []any {
			return []any{v.SummaryID, v.Ord, v.ChildID, v.FromSeq, v.ToSeq, w.g.owner}
		})
}

func (w *ownerWriter) episodes(ctx context.Context) error {
	if err := w.episodeQuota(ctx); err != nil {
		return err
	}
	textConfig, err := w.textConfig(ctx)
	if err != nil {
		return err
	}
	return insertEach(ctx, w, KindEpisode, `INSERT INTO `+w.t("episodes")+` (id, owner_id, session_id, agent_id, summary,
			method, user_turns, started_at, ended_at, embedding, created_at, tsv_config, tsv_local)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, `+core.TextLocal("$12", "$5")+`) ON CONFLICT DO NOTHING`,
		func(v *episodeRec) bool { return w.heldSessions[v.SessionID] }, func(v *episodeRec) []any {
			return []any{v.ID, w.g.owner, v.SessionID, v.AgentID, v.Summary, v.Method, v.UserTurns, v.StartedAt, v.EndedAt,
				vec(v.Embedding), v.CreatedAt, textConfig}
		})
}

func (w *ownerWriter) documents(ctx context.Context) error {
	return insertEach(ctx, w, KindDocument, `INSERT INTO `+w.t("documents")+` (owner_id, agent_id, kind, version, content,
			source, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
		nil, func(v *documentRec) []any {
			return []any{w.g.owner, v.AgentID, v.Type, v.Version, v.Content, v.Source, v.UpdatedAt}
		})
}

func (w *ownerWriter) documentChanges(ctx context.Context) error {
	return insertEach(ctx, w, KindDocumentChange, `INSERT INTO `+w.t("document_changes")+` (owner_id, agent_id, kind,
			version, source, actor_id, before, after, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
		func(v *documentChangeRec) bool { return w.heldDocs[v.AgentID+" "+v.Type] }, func(v *documentChangeRec) []any {
			return []any{w.g.owner, v.AgentID, v.Type, v.Version, v.Source, v.ActorID, v.Before, v.After, v.CreatedAt}
		})
}

// memories inserts the memories without their supersede links, then
// links them (a chain may point forward in the file), then their access
// statistics; links and statistics only of memories this import inserted.
func (w *ownerWriter) memories(ctx context.Context) error {
	recs := w.g.byKind[KindMemory]
	if len(recs) == 0 {
		return nil
	}
	have, err := w.existingIDs(ctx, `SELECT id::text FROM `+w.t("memories")+` WHERE id = ANY($1::uuid[])`, keysOf(recs, func(v *memoryRec) string { return v.ID }))
	if err != nil {
		return err
	}
	textConfig, err := w.textConfig(ctx)
	if err != nil {
		return err
	}
	for _, r := range recs {
		v := r.value.(*memoryRec)
		if err := w.queue(ctx, KindMemory, `INSERT INTO `+w.t("memories")+` (id, owner_id, agent_id, session_id,
			source_session, source, category, content, importance, embedding, flags, active, expires_at,
			created_at, updated_at, deactivated_at, access_count, last_accessed_at, metadata, tags, tsv_config, tsv_local)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
				COALESCE($19::jsonb, '{}'::jsonb), COALESCE($20::text[], '{}'::text[]), `+core.TextLocal("$21", "$8")+`)
			ON CONFLICT DO NOTHING`,
			v.ID, w.g.owner, v.AgentID, v.SessionID, v.SourceSession, v.Source, v.Category, v.Content,
			v.Importance, vec(v.Embedding), flags(v.Flags), v.Active, v.ExpiresAt, v.CreatedAt, v.UpdatedAt,
			v.DeactivatedAt, v.AccessCount, v.LastAccessedAt, write.MetadataParam(v.Metadata), write.TagsParam(v.Tags), textConfig); err != nil {
			return err
		}
	}
	for _, r := range recs {
		v := r.value.(*memoryRec)
		if have[v.ID] {
			continue
		}
		if v.SupersededBy != nil {
			if err := w.queue(ctx, "", `UPDATE `+w.t("memories")+` SET superseded_by = $2
				WHERE id = $1 AND owner_id = $3
				AND EXISTS (SELECT 1 FROM `+w.t("memories")+` WHERE id = $2 AND owner_id = $3)`,
				v.ID, *v.SupersededBy, w.g.owner); err != nil {
				return err
			}
		}
		if v.Access != nil {
			if err := w.queue(ctx, "", `INSERT INTO `+w.t("memory_access")+` (memory_id, owner_id, access_count, last_accessed_at)
				VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, v.ID, w.g.owner, v.Access.Count, v.Access.LastAccessedAt); err != nil {
				return err
			}
		}
	}
	return nil
}

// history writes the history of each memory the tenant holds no history
// of: a memory's history is imported whole or not at all, so a second
// import adds nothing (history rows have no id of their own in the format).
func (w *ownerWriter) history(ctx context.Context) error {
	recs := w.g.byKind[KindHistory]
	if len(recs) == 0 {
		return nil
	}
	if err := w.send(ctx); err != nil {
		return err
	}
	ids := keysOf(recs, func(v *historyRec) string { return v.MemoryID })
	// History goes only with the owner's own memories: a file must not
	// hang rows on another owner's memory, which that owner's deletions
	// would then take along (fifteenth review of issue 26).
	foreign, err := w.existingIDs(ctx, `SELECT id::text FROM `+w.t("memories")+`
		WHERE id = ANY($1::uuid[]) AND owner_id IS DISTINCT FROM $2`, ids, w.g.owner)
	if err != nil {
		return err
	}
	have, err := w.existingIDs(ctx, `SELECT DISTINCT memory_id::text FROM `+w.t("memory_history")+`
		WHERE owner_id = $2 AND memory_id = ANY($1::uuid[])`, ids, w.g.owner)
	if err != nil {
		return err
	}
	for _, r := range recs {
		v := r.value.(*historyRec)
		if foreign[v.MemoryID] {
			return core.Invalid(fmt.Sprintf("lines[%d].memoryId", r.line),
				"memory %s is another owner's in this tenant: history is imported only with the owner's own memories", v.MemoryID)
		}
		if have[v.MemoryID] {
			w.c.existing[KindHistory]++
			continue
		}
		if err := w.queue(ctx, KindHistory, `INSERT INTO `+w.t("memory_history")+` (memory_id, owner_id, action, actor,
			actor_id, old_content, new_content, details, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			v.MemoryID, w.g.owner, v.Action, v.Actor, v.ActorID, v.OldContent, v.NewContent,
			v.Details, v.CreatedAt); err != nil {
			return err
		}
	}
	return nil
}

// existingIDs runs sql (ids in $1, more args after) and returns the set
// of ids it answers.
func (w *ownerWriter) existingIDs(ctx context.Context, sql string, ids []string, args ...any) (map[string]bool, error) {
	if err := w.send(ctx); err != nil {
		return nil, err
	}
	rows, err := w.tx.Query(ctx, sql, append([]any{ids}, args...)...)
	if err != nil {
		return nil, core.DBErr("reading the rows an import would repeat", err)
	}
	ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, core.DBErr("reading the rows an import would repeat", err)
	}
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set, nil
}

// episodeQuota refuses an owner whose episodes, those the tenant holds and
// those the file adds, would pass limits.maxEpisodesPerOwner: the write
// path keeps that bound (recording skips an owner at it), and context and
// episode search read an owner's episodes (issue 26, twenty-first review:
// two imports gave one owner 22,000 episodes, each context call 120-470
// ms). Re-imported episodes (same id) are not counted twice.
func (w *ownerWriter) episodeQuota(ctx context.Context) error {
	recs := w.g.byKind[KindEpisode]
	if len(recs) == 0 {
		return nil
	}
	have, err := w.existingIDs(ctx, `SELECT id::text FROM `+w.t("episodes")+` WHERE id = ANY($1::uuid[])`,
		keysOf(recs, func(v *episodeRec) string { return v.ID }))
	if err != nil {
		return err
	}
	var adding int64
	for _, r := range recs {
		v := r.value.(*episodeRec)
		if !have[v.ID] && !w.heldSessions[v.SessionID] {
			adding++
		}
	}
	held, err := core.CountOwnerRows(ctx, w.tx, w.t("episodes"), "episodes", w.g.owner)
	if err != nil {
		return err
	}
	if limit := int64(w.s.core.Policy.Limits.MaxEpisodesPerOwner); limit > 0 && held+adding > limit {
		return core.Invalid("owners["+w.g.owner+"]", "the owner would hold %d episodes, more than limits.maxEpisodesPerOwner (%d) of this runtime's policy", held+adding, limit)
	}
	return nil
}
