package longterm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
)

const (
	defaultEpisodeLimit = 10
	maxEpisodeLimit     = 50
	// episodeHalfLife is the half-life of an episode's recency score.
	episodeHalfLife = 30 * 24 * time.Hour
	// maxEpisodeMessages bounds the messages an episode summary reads (the newest).
	maxEpisodeMessages = 400
	// maxIdleEpisodesPerRun bounds the episodes one sessions job writes.
	maxIdleEpisodesPerRun = 200
)

// episodeColumns are selected (alias e) wherever an Episode is returned.
const episodeColumns = `e.id::text, e.owner_id, e.session_id, e.agent_id, e.summary, e.method, e.user_turns,
	e.started_at, e.ended_at, e.created_at`

func scanEpisode(row pgx.Row, extra ...any) (Episode, error) {
	var e Episode
	dest := []any{&e.ID, &e.Owner, &e.SessionID, &e.Agent, &e.Summary, &e.Method, &e.UserTurns, &e.StartedAt, &e.EndedAt, &e.CreatedAt}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return Episode{}, err
	}
	e.StartedAt, e.EndedAt, e.CreatedAt = e.StartedAt.UTC(), e.EndedAt.UTC(), e.CreatedAt.UTC()
	return e, nil
}

// IdleEpisodes writes the episodes of sessions that went idle (no message
// for conversation.archiveAfter, else sessionIdleTTL) before the sessions
// job archives or deletes them; at most maxIdleEpisodesPerRun a run. res
// is not changed: the job's counts stay those of sessions archived and deleted.
func (s *Store) IdleEpisodes(ctx context.Context, opts core.JobOptions) error {
	c := s.core.Policy.Conversation
	idle := c.ArchiveAfter
	if idle == 0 || (c.SessionIdleTTL > 0 && c.SessionIdleTTL < idle) {
		idle = c.SessionIdleTTL
	}
	if idle == 0 || opts.DryRun {
		return nil
	}
	// Owners at limits.maxEpisodesPerOwner are left out: their idle
	// sessions would otherwise come first run after run (oldest first) and
	// take every slot of the run from other owners' sessions.
	rows, err := s.core.Pool.Query(ctx, `WITH full_owners AS (SELECT e.owner_id FROM `+s.sql.episodes+` AS e
			GROUP BY e.owner_id HAVING count(*) >= $4)
		SELECT c.owner_id, c.id FROM `+s.sql.sessions+` AS c
		WHERE c.last_active_at < now() - make_interval(secs => $1)
			AND NOT EXISTS (SELECT 1 FROM `+s.sql.episodes+` AS e WHERE e.owner_id = c.owner_id AND e.session_id = c.id)
			AND NOT EXISTS (SELECT 1 FROM full_owners AS f WHERE f.owner_id = c.owner_id)
			AND (SELECT count(*) FROM `+s.sql.messages+` AS g WHERE g.owner_id = c.owner_id AND g.session_id = c.id AND g.role = 'user') >= $2
		ORDER BY c.last_active_at LIMIT $3`, time.Duration(idle).Seconds(), MinEpisodeUserTurns, maxIdleEpisodesPerRun,
		s.core.Policy.Limits.MaxEpisodesPerOwner)
	if err != nil {
		return core.DBErr("finding idle sessions without an episode", err)
	}
	type key struct{ owner, id string }
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (key, error) {
		var k key
		return k, r.Scan(&k.owner, &k.id)
	})
	if err != nil {
		return core.DBErr("finding idle sessions without an episode", err)
	}
	for _, k := range keys {
		_, err := s.SettleEpisode(ctx, k.owner, k.id, false)
		var qe *core.QuotaError
		if errors.As(err, &qe) {
			// The owner is at limits.maxEpisodesPerOwner: the session stays
			// without an episode (and is archived or deleted as usual).
			s.core.Log.Warn("not writing the episode of an idle session: the owner is at its quota", "quota", qe.Quota, "limit", qe.Limit)
			continue
		}
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return fmt.Errorf("writing the episode of an idle session: %w", err)
		}
	}
	return nil
}

// SearchEpisodes ranks an owner's episodes by hybrid score with recency
// (EpisodeHit), or lists them newest first when the query is empty; the
// results are given best first while their JSON fits the byte cap, the
// rest counted in Omitted. Errors: ValidationError.
func (s *Store) SearchEpisodes(ctx context.Context, req EpisodeSearchRequest) (*EpisodeSearchResult, error) {
	fe := &core.FieldErrors{}
	fe.Owner(req.Owner)
	fe.Scope(req.Agent, "")
	if req.Query != "" {
		fe.Text("query", req.Query, s.core.Policy.Limits.MaxQueryBytes)
	}
	limit := fe.Limit(req.Limit, defaultEpisodeLimit, maxEpisodeLimit)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	hits, err := s.RelevantEpisodes(ctx, req.Owner, req.Agent, req.Query, limit)
	if err != nil {
		return nil, err
	}
	res := &EpisodeSearchResult{Results: []EpisodeHit{}}
	n := core.FitRanked(core.NewAnswerBytes(s.core.AnswerCap(req.MaxBytes), res), hits)
	res.Results = hits[:n]
	if n < len(hits) {
		res.Truncated, res.Omitted = true, len(hits)-n
	}
	return res, nil
}

func (s *Store) RelevantEpisodes(ctx context.Context, owner, agent, query string, limit int) ([]EpisodeHit, error) {
	a := &core.Args{}
	where := `e.owner_id = ` + a.Add(owner)
	if agent != "" {
		where += ` AND e.agent_id IN ('', ` + a.Add(agent) + `)`
	}
	recency := `exp(-ln(2) / ` + a.Add(episodeHalfLife.Seconds()) + `::float8 * greatest(0, extract(epoch FROM now() - e.ended_at)))`
	vs, ts, from := `0::float8`, `0::float8`, s.sql.episodes+` AS e`
	if query != "" {
		vecs, err := s.core.Embedder.Embed(ctx, []string{s.core.Redactor.Redacted(query)})
		if err != nil || len(vecs) != 1 {
			return nil, fmt.Errorf("embedding the query: %w", err)
		}
		vs = `coalesce(1 - (e.embedding <=> ` + a.Add(pgv.NewVector(vecs[0])) + `), 0)`
		cfg, err := s.core.TextConfig(ctx)
		if err != nil {
			return nil, err
		}
		// An owner's episodes are read by owner (at most
		// limits.maxEpisodesPerOwner): no text index is needed for them.
		// Under another configuration than English the stored tsv_local
		// (migration 19) is read, as English reads tsv.
		tv := core.RowTextVector(cfg, "e.", "summary")
		from += `, (SELECT ` + core.OrQuery(cfg, a.Add(query)) + `) AS q(q)`
		ts = core.TextRank(cfg, tv, "q.q")
	}
	w := s.core.Policy.Search
	var sql string
	if query == "" {
		sql = `SELECT ` + episodeColumns + `, 0::float8, 0::float8, ` + recency + ` FROM ` + from + ` WHERE ` + where +
			` ORDER BY e.ended_at DESC, e.id LIMIT ` + a.Add(limit)
	} else {
		sql = `SELECT * FROM (SELECT ` + episodeColumns + `, ` + vs + ` AS vs, ` + ts + ` AS ts, ` + recency + ` AS rs
				FROM ` + from + ` WHERE ` + where + `) AS r
			ORDER BY ` + a.Add(w.VectorWeight) + `::float8 * r.vs + ` + a.Add(w.TextWeight) + `::float8 * r.ts + ` +
			a.Add(w.DecayWeight) + `::float8 * r.rs DESC, r.ended_at DESC, r.id LIMIT ` + a.Add(limit)
	}
	rows, err := s.core.Pool.Query(ctx, sql, a.List...)
	if err != nil {
		return nil, core.DBErr("searching episodes", err)
	}
	defer rows.Close()
	hits := []EpisodeHit{}
	for rows.Next() {
		var h EpisodeHit
		if h.Episode, err = scanEpisode(rows, &h.VectorScore, &h.TextScore, &h.RecencyScore); err != nil {
			return nil, core.DBErr("searching episodes", err)
		}
		h.Score = w.VectorWeight*h.VectorScore + w.TextWeight*h.TextScore + w.DecayWeight*h.RecencyScore
		if query == "" {
			h.Score = h.RecencyScore
		}
		if math.IsNaN(h.Score) {
			h.Score = 0
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, core.DBErr("searching episodes", err)
	}
	return hits, nil
}
