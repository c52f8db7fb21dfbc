package write

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
)

// maxBatch bounds one AddBatch call.
const maxBatch = 1000

// Prepared is a validated, redacted write ready to be embedded and stored
// (Store.Prepare, then Store.EmbedAll).
type Prepared struct {
	Req        AddRequest // normalized: source, category and importance set
	Content    string     // after redaction
	redactions []string
	Flags      []string       // of the injection guard (Flag mode)
	ttl        *time.Duration // per-memory override of the category ttl
	Vec        []float32
	// NextVec is the next embedder's vector of Content while the tenant
	// re-embeds toward it (core.Next); nil: embedding_next is not written.
	NextVec []float32
	// FactIndex is a session extraction's index of the fact in its result
	// (the caller's; the write path does not read it).
	FactIndex int
}

// Add stores one memory with two-threshold dedup: validate, redact, guard,
// embed (outside any transaction), then under the owner's row lock (lockOwner)
// compare with the owner's nearest memory: merge at or above
// autoMergeThreshold, let the arbiter decide in the band below it, insert
// otherwise. Over the per-owner cap, the lowest-value memories are evicted
// after commit.
func (s *Store) Add(ctx context.Context, req AddRequest) (*AddResult, error) {
	fe := &core.FieldErrors{}
	p, err := s.Prepare(req, fe)
	if err != nil {
		return nil, err
	}
	if err := s.EmbedAll(ctx, []*Prepared{p}); err != nil {
		return nil, err
	}
	results, err := s.StoreGroup(ctx, []*Prepared{p})
	if err != nil {
		return nil, err
	}
	return &results[0], nil
}

// AddBatch validates every item first — one ValidationError naming each bad
// field as items[i].<field>, and nothing is written — then embeds them in
// one call and stores them in order, one transaction per run of items of
// the same owner.
func (s *Store) AddBatch(ctx context.Context, reqs []AddRequest) ([]AddResult, error) {
	if len(reqs) == 0 {
		return nil, core.Invalid("items", "at least one item is required")
	}
	if len(reqs) > maxBatch {
		return nil, core.Invalid("items", "%d items is more than the limit of %d per batch", len(reqs), maxBatch)
	}
	prepared, err := s.prepareAll(reqs)
	if err != nil {
		return nil, err
	}
	if err := s.EmbedAll(ctx, prepared); err != nil {
		return nil, err
	}
	out := make([]AddResult, 0, len(reqs))
	for start := 0; start < len(prepared); {
		end := start + 1
		for end < len(prepared) && prepared[end].Req.Owner == prepared[start].Req.Owner {
			end++
		}
		results, err := s.StoreGroup(ctx, prepared[start:end])
		if err != nil {
			return out, fmt.Errorf("storing item %d: %w", start+len(results), err)
		}
		out = append(out, results...)
		start = end
	}
	return out, nil
}

// StoreGroup stores embedded writes of one owner in one transaction under the owner's
// lock (addInTx), then evicts over the cap. Arbiter calls happen before the
// transaction so no network call holds the lock.
func (s *Store) StoreGroup(ctx context.Context, ps []*Prepared) ([]AddResult, error) {
	plans := make([]*Plan, len(ps))
	for i, p := range ps {
		plans[i] = s.planArbitration(ctx, p)
	}
	owner := ps[0].Req.Owner
	results, err := s.addOnWorker(ctx, ps, plans)
	if err == nil && results == nil {
		results, err = s.addInTx(ctx, owner, ps, plans)
	}
	if err != nil {
		return nil, err
	}
	byUser := true
	for _, p := range ps {
		byUser = byUser && p.Req.Source == core.SourceUser
	}
	s.EvictAfter(ctx, owner, results, byUser)
	return results, nil
}

// Neighbour is the owner's memory nearest to a write (Store.Nearest): ID,
// Content, its similarity Sim, and Exact when the text is identical.
type Neighbour struct {
	ID, Content, category string
	agent, session        string
	active                bool
	updatedAt             time.Time
	Sim                   float64
	Exact                 bool
	// source of the row; read by lockNeighbour only (the lookup's columns
	// are fixed: the benchmark's raw side scans them too).
	source core.Source
}

// Nearest finds the owner's memory most similar to vec among active and
// inactive rows that are not superseded; an identical text always wins.
// Inactive rows the purge job will delete within purgeGuard are left out:
// they are about to go, and the purge may hold their row locks. With lock
// it also locks the row (FOR UPDATE); add's transaction does not, it locks
// the Neighbour only when it is about to act on it (lockNeighbour).
func (s *Store) Nearest(ctx context.Context, q core.Querier, owner, content string, vec []float32, lock bool) (*Neighbour, error) {
	sql := s.nearestQuery(len(vec), lock)
	n, err := scanNeighbour(q.QueryRow(ctx, sql, owner, pgv.NewVector(vec), content))
	if err != nil {
		return nil, core.DBErr("finding the nearest memory", err)
	}
	return n, nil
}

// scanNeighbour reads a row of nearestQuery, then extra destinations; nil
// when there is none.
func scanNeighbour(row pgx.Row, extra ...any) (*Neighbour, error) {
	var n Neighbour
	err := row.Scan(append([]any{&n.ID, &n.Content, &n.category, &n.agent, &n.session, &n.active, &n.updatedAt, &n.Sim, &n.Exact}, extra...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if n.Exact {
		n.Sim = 1
	}
	return &n, nil
}

// lockNeighbour locks the Neighbour a write is about to merge into, rewrite,
// supersede or return, and reads it again: the lookup did not lock it (an
// insert, the common case, leaves it alone), and jobs that do not take the
// owner's lock (decay, expire) may have deactivated it since. nil when it is
// gone or superseded. Which row is the Neighbour cannot have changed: the
// owner's lock keeps out every other writer of content, vectors and
// superseded_by, and the lookup leaves out rows the purge may delete.
func (s *Store) lockNeighbour(ctx context.Context, tx core.DBTX, nb *Neighbour, p *Prepared) (*Neighbour, error) {
	var src string
	n, err := scanNeighbour(tx.QueryRow(ctx, `SELECT m.id::text, m.content, m.category, m.agent_id, m.session_id, m.active, m.updated_at,
			1 - (m.embedding <=> $2), m.content = $3, m.source
		FROM `+s.sql.memories+` AS m WHERE m.id = $1 AND m.superseded_by IS NULL FOR UPDATE`, nb.ID, pgv.NewVector(p.Vec), p.Content), &src)
	if err != nil {
		return nil, core.DBErr("locking memory "+nb.ID, err)
	}
	if n != nil {
		n.source = core.Source(src)
	}
	return n, nil
}

// nearestQuery is nearest's SQL: the owner-local two-phase lookup when the
// vectors fit the covering index, else the one-phase one.
func (s *Store) nearestQuery(dims int, lock bool) string {
	if s.ownerVectors(dims) {
		return nearestSQL(s.sql.memories, s.KeptSinceSQL(s.PurgeGuard()), lock)
	}
	return legacyNearestSQL(s.sql.memories, s.PurgeDueSQL(s.PurgeGuard()), lock)
}

// NearestQuery is the SQL of add's Neighbour lookup (in its transaction,
// after LockOwnerQuery) for vectors of dims dimensions, with parameters $1
// owner, $2 vector, $3 content (the benchmark's raw side runs exactly this).
func (s *Store) NearestQuery(dims int) string { return s.nearestQuery(dims, false) }

// decide performs one write given its Neighbour nb. commit, when not nil,
// asks the write to commit the transaction if it ends with a plain insert
// (sent in the insert's round trip); *commit tells whether it did.
func (s *Store) decide(ctx context.Context, tx core.DBTX, p *Prepared, plan *Plan, nb *Neighbour, commit *bool) (*AddResult, error) {
	res := &AddResult{Redactions: p.redactions}
	d := s.core.Policy.Dedup
	if nb == nil || !nb.Exact && nb.Sim < d.ArbitrationThreshold {
		if nb != nil {
			res.Similarity = nb.Sim
		}
		return s.insertCommit(ctx, tx, p, res, commit)
	}
	nb, err := s.lockNeighbour(ctx, tx, nb, p)
	if err != nil {
		return nil, err
	}
	if nb == nil {
		return s.insert(ctx, tx, p, res)
	}
	res.Similarity = nb.Sim
	switch {
	case nb.Exact || nb.Sim >= d.AutoMergeThreshold:
		if s.protectedFor(nb.category, p.Req.Source) {
			return s.noop(ctx, tx, nb, res)
		}
		return s.merge(ctx, tx, p, nb, res)
	case nb.Sim >= d.ArbitrationThreshold:
		return s.applyArbitration(ctx, tx, p, nb, plan, res)
	default:
		return s.insert(ctx, tx, p, res)
	}
}

// protectedFor reports whether a write from src may not change a memory of
// category. A category the policy no longer has (renamed or removed) counts
// as protected: what it held may have been a user's hard constraint.
func (s *Store) protectedFor(category string, src core.Source) bool {
	c, ok := s.core.Policy.Category(category)
	return (!ok || c.Protected) && src != core.SourceUser
}

// ExpirySeconds is the ttl applied to a write: its own, else its category's; 0 = never.
func (s *Store) ExpirySeconds(category string, override *time.Duration) float64 {
	if override != nil {
		return override.Seconds()
	}
	c, _ := s.core.Policy.Category(category)
	return time.Duration(c.TTL).Seconds()
}

func (s *Store) insert(ctx context.Context, tx core.DBTX, p *Prepared, res *AddResult) (*AddResult, error) {
	return s.insertCommit(ctx, tx, p, res, nil)
}

// insertCommit inserts; with commit not nil it sends COMMIT in the same
// round trip and sets *commit once the server has committed.
func (s *Store) insertCommit(ctx context.Context, tx core.DBTX, p *Prepared, res *AddResult, commit *bool) (*AddResult, error) {
	details := labelDetails(map[string]any{"similarity": res.Similarity}, p)
	if len(p.redactions) > 0 {
		details["redactions"] = p.redactions
	}
	textConfig, err := s.core.WriteTextConfig(ctx, tx)
	if err != nil {
		return nil, err
	}
	args := []any{core.NewID(), p.Req.Owner, p.Req.Agent, p.Req.Session, string(p.Req.Source),
		p.Req.Category, p.Content, p.Req.Importance, pgv.NewVector(p.Vec), FlagsOrEmpty(p.Flags),
		s.ExpirySeconds(p.Req.Category, p.ttl), details, core.ActorID(ctx), p.Req.SourceSession,
		MetadataParam(p.Req.Metadata), TagsParam(p.Req.Tags), textConfig}
	query := s.InsertQuery()
	if p.NextVec != nil {
		query = s.insertQuery(true)
		args = append(args, pgv.NewVector(p.NextVec))
	}
	// The count runs in the statement's snapshot, which does not yet hold the
	// new row: +1. It spares EvictAfter a round trip when under the cap.
	var m Memory
	if commit == nil {
		m, err = ScanMemory(tx.QueryRow(ctx, query, args...), &res.ownerRows)
	} else {
		m, err = s.insertAndCommit(ctx, tx, query, args, &res.ownerRows)
		*commit = err == nil
	}
	if err != nil {
		return nil, core.DBErr("inserting memory", err)
	}
	res.Action, res.Memory = ActionAdded, m
	if res.Arbiter == "" && res.Similarity >= s.core.Policy.Dedup.ArbitrationThreshold {
		res.Arbiter = "none"
	}
	return res, nil
}

// insertAndCommit runs InsertQuery and COMMIT in one pipeline.
func (s *Store) insertAndCommit(ctx context.Context, tx core.DBTX, query string, args []any, ownerRows *int) (Memory, error) {
	b := &pgx.Batch{}
	b.Queue(query, args...)
	b.Queue("COMMIT")
	br := tx.SendBatch(ctx, b)
	defer func() { _ = br.Close() }()
	m, err := ScanMemory(br.QueryRow(), ownerRows)
	if err != nil {
		return Memory{}, err
	}
	tag, err := br.Exec()
	if err := commitResult(tag.String(), err); err != nil {
		return Memory{}, fmt.Errorf("commit: %w", err)
	}
	return m, br.Close()
}

// mergedCategory keeps the more important of two categories (pinned, then
// priority) so a duplicate written into a lesser category never demotes a fact.
func (s *Store) mergedCategory(existing, incoming string) string {
	a, okA := s.core.Policy.Category(existing)
	b, okB := s.core.Policy.Category(incoming)
	if !okA {
		return incoming
	}
	if !okB || a.Pinned && !b.Pinned || (a.Pinned == b.Pinned && a.Priority > b.Priority) {
		return existing
	}
	return incoming
}

// merge updates the Neighbour in place with the new wording (and
// reactivates it); the scope widens to owner level when agents or sessions
// differ. The row keeps only the new text (the old one is in its history),
// so it takes the write's source; its category follows mergeCategory.
func (s *Store) merge(ctx context.Context, tx core.DBTX, p *Prepared, nb *Neighbour, res *AddResult) (*AddResult, error) {
	action := ActionMerged
	if !nb.active {
		action = ActionReactivated
	}
	category, ok := s.mergeCategory(nb, p, p.Req.Source)
	if !ok {
		return s.insert(ctx, tx, p, res)
	}
	m, err := s.mergeRewrite(ctx, tx, nb, p, rewrite{
		content: p.Content, vec: p.Vec, nextVec: p.NextVec, category: category,
		source: p.Req.Source, action: string(action),
	}, map[string]any{"wasActive": nb.active})
	if err != nil {
		return nil, err
	}
	res.Action, res.Memory = action, m
	return res, nil
}

// rewrite is an in-place update of a Neighbour by a write.
type rewrite struct {
	content    string
	vec        []float32
	nextVec    []float32 // the next embedder's (Prepared.NextVec); nil: not written
	category   string
	importance int
	// source is the row's source after the write, actor the writer's
	// (history's actor): they differ when a merge keeps the lower trust.
	source, actor  core.Source
	agent, session string
	sourceSession  string // "" keeps the row's
	flags          []string
	expiry         float64
	action         string
	details        map[string]any
	owner          string // the neighbour's, for its history row
	// metadata and tags replace the row's when not nil (the write's).
	metadata json.RawMessage
	tags     []string
}

// rewrite updates the neighbour, which lockNeighbour has locked, and writes
// its history row from values the caller holds (historyrow.go).
func (s *Store) rewrite(ctx context.Context, tx core.DBTX, nb *Neighbour, w rewrite) (Memory, error) {
	textConfig, err := s.core.WriteTextConfig(ctx, tx)
	if err != nil {
		return Memory{}, err
	}
	args := []any{nb.ID, w.content, pgv.NewVector(w.vec), w.category, w.importance,
		string(w.source), FlagsOrEmpty(w.flags), w.agent, w.session, w.expiry, w.action, nb.Content, w.details, core.ActorID(ctx),
		string(w.actor), w.sourceSession, w.owner, MetadataParam(w.metadata), TagsParam(w.tags), textConfig}
	next := ""
	if w.nextVec != nil {
		next, args = "embedding_next = $21, ", append(args, pgv.NewVector(w.nextVec))
	}
	sql := `WITH upd AS (
			UPDATE ` + s.sql.memories + ` AS m SET
				content = $2, embedding = $3, ` + next + ` category = $4, importance = greatest(m.importance, $5),
				source = $6, flags = $7,
				agent_id = CASE WHEN m.agent_id = $8 THEN m.agent_id ELSE '' END,
				session_id = CASE WHEN m.session_id = $9 THEN m.session_id ELSE '' END,
				source_session = CASE WHEN $16::text <> '' THEN $16::text ELSE m.source_session END,
				metadata = coalesce($18::jsonb, m.metadata), tags = coalesce($19::text[], m.tags),
				tsv_config = NULLIF($20::text, ''), tsv_local = to_tsvector(NULLIF($20::text, '')::regconfig, $2),
				active = true, deactivated_at = NULL, expires_at = ` + Expiry("$10") + `, updated_at = now()
			WHERE m.id = $1 AND m.superseded_by IS NULL
			RETURNING ` + s.sql.columns + `),
		h AS (
			INSERT INTO ` + s.sql.history + ` (memory_id, owner_id, action, actor, actor_id, old_content, new_content, details)
			VALUES ($1::uuid, $17, $11, $15, $14, $12, $2, $13))
		SELECT * FROM upd`
	m, err := s.UpdateAndPrune(ctx, tx, nb.ID, sql, args...)
	if errors.Is(err, pgx.ErrNoRows) {
		// lockNeighbour holds the row: it cannot be gone. Were it, the
		// history row is written already; fail the transaction.
		return Memory{}, fmt.Errorf("updating memory %s: the row locked by this write is gone: %w", nb.ID, core.ErrConflict)
	}
	if err != nil {
		return Memory{}, core.DBErr("updating memory "+nb.ID, err)
	}
	return m, nil
}

// noop returns the Neighbour unchanged.
func (s *Store) noop(ctx context.Context, tx core.DBTX, nb *Neighbour, res *AddResult) (*AddResult, error) {
	m, err := ScanMemory(tx.QueryRow(ctx, `SELECT `+s.sql.columns+` FROM `+s.sql.memories+` AS m WHERE m.id = $1`, nb.ID))
	if err != nil {
		return nil, core.DBErr("reading memory "+nb.ID, err)
	}
	res.Action, res.Memory = ActionNoop, m
	return res, nil
}

// FlagsOrEmpty is f, or an empty list for the flags column (never NULL).
func FlagsOrEmpty(f []string) []string {
	if f == nil {
		return []string{}
	}
	return f
}

// TTL is the write's own ttl, overriding its category's (nil: the category's).
func (p *Prepared) TTL() *time.Duration { return p.ttl }
