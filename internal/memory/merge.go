package memory

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"
)

// The write of a duplicate: decide (add.go) merges a new memory into its
// identical or near-identical neighbour, or leaves it (noop) when the
// neighbour is protected from the writer.

// mergedCategory keeps the more important of two categories (pinned, then
// priority) so a duplicate written into a lesser category never demotes a fact.
func (s *writer) mergedCategory(existing, incoming string) string {
	a, okA := s.policy.Category(existing)
	b, okB := s.policy.Category(incoming)
	if !okA {
		return incoming
	}
	if !okB || a.Pinned && !b.Pinned || (a.Pinned == b.Pinned && a.Priority > b.Priority) {
		return existing
	}
	return incoming
}

// merge updates the neighbour in place with the new wording (and
// reactivates it); the scope widens to owner level when agents or sessions
// differ. The row keeps only the new text (the old one is in its history),
// so it takes the write's source; its category follows mergeCategory.
func (s *writer) merge(ctx context.Context, tx dbtx, p *preparedAdd, nb *neighbour, res *AddResult) (*AddResult, error) {
	action := ActionMerged
	if !nb.active {
		action = ActionReactivated
	}
	category, ok := s.mergeCategory(nb, p, p.req.Source)
	if !ok {
		return s.insert(ctx, tx, p, res)
	}
	m, err := s.rewrite(ctx, tx, nb, rewrite{
		content: p.content, vec: p.vec, category: category, importance: p.req.Importance,
		source: p.req.Source, actor: p.req.Source, agent: p.req.Agent, session: p.req.Session,
		sourceSession: p.req.SourceSession, flags: p.flags,
		expiry: s.expirySeconds(category, p.ttl), action: string(action),
		details: mergeDetails(map[string]any{"similarity": nb.sim, "wasActive": nb.active}, nb, p),
	})
	if errors.Is(err, pgx.ErrNoRows) { // the neighbour vanished (purged) meanwhile
		return s.insert(ctx, tx, p, res)
	}
	if err != nil {
		return nil, err
	}
	res.Action, res.Memory = action, m
	return res, nil
}

// rewrite is an in-place update of a neighbour by a write.
type rewrite struct {
	content    string
	vec        []float32
	category   string
	importance int
	// source is the row's source after the write, actor the writer's
	// (history's actor): they differ when a merge keeps the lower trust.
	source, actor  Source
	agent, session string
	sourceSession  string // "" keeps the row's
	flags          []string
	expiry         float64
	action         string
	details        map[string]any
}

func (s *writer) rewrite(ctx context.Context, tx dbtx, nb *neighbour, w rewrite) (Memory, error) {
	sql := `WITH upd AS (
			UPDATE ` + s.sql.memories + ` AS m SET
				content = $2, embedding = $3, category = $4, importance = greatest(m.importance, $5),
				source = $6, flags = $7,
				agent_id = CASE WHEN m.agent_id = $8 THEN m.agent_id ELSE '' END,
				session_id = CASE WHEN m.session_id = $9 THEN m.session_id ELSE '' END,
				source_session = CASE WHEN $16::text <> '' THEN $16::text ELSE m.source_session END,
				active = true, deactivated_at = NULL, expires_at = ` + expiry("$10") + `, updated_at = now()
			WHERE m.id = $1 AND m.superseded_by IS NULL
			RETURNING ` + s.sql.columns + `),
		h AS (
			INSERT INTO ` + s.sql.history + ` (memory_id, owner_id, action, actor, actor_id, old_content, new_content, details)
			SELECT id::uuid, owner_id, $11, $15, $14, $12, content, $13 FROM upd)
		SELECT * FROM upd`
	m, err := (*maintenance)(s).updateAndPrune(ctx, tx, nb.id, sql, nb.id, w.content, pgv.NewVector(w.vec), w.category, w.importance,
		string(w.source), flagsOrEmpty(w.flags), w.agent, w.session, w.expiry, w.action, nb.content, w.details, actorID(ctx),
		string(w.actor), w.sourceSession)
	if errors.Is(err, pgx.ErrNoRows) {
		return Memory{}, err
	}
	if err != nil {
		return Memory{}, dbErr("updating memory "+nb.id, err)
	}
	return m, nil
}

// noop returns the neighbour unchanged.
func (s *writer) noop(ctx context.Context, tx dbtx, nb *neighbour, res *AddResult) (*AddResult, error) {
	m, err := scanMemory(tx.QueryRow(ctx, `SELECT `+s.sql.columns+` FROM `+s.sql.memories+` AS m WHERE m.id = $1`, nb.id))
	if err != nil {
		return nil, dbErr("reading memory "+nb.id, err)
	}
	res.Action, res.Memory = ActionNoop, m
	return res, nil
}

func flagsOrEmpty(f []string) []string {
	if f == nil {
		return []string{}
	}
	return f
}
