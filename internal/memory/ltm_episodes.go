package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"
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

// writeEpisode writes the episode of a session with at least
// MinEpisodeUserTurns user messages (nil otherwise), or returns the one it
// already has: a summary of its newest messages (LLM, else extractive),
// its embedding and the time range of its messages.
func (s *Store) writeEpisode(ctx context.Context, owner, sessionID string) (*Episode, error) {
	e, err := scanEpisode(s.pool.QueryRow(ctx, `SELECT `+episodeColumns+` FROM `+s.sql.episodes+` AS e
		WHERE e.owner_id = $1 AND e.session_id = $2`, owner, sessionID))
	if err == nil {
		return &e, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, s.dbErr("reading the episode", err)
	}
	var turns int
	var agent string
	var first, last *time.Time
	err = s.pool.QueryRow(ctx, `SELECT c.agent_id, count(g.seq) FILTER (WHERE g.role = 'user'), min(g.created_at), max(g.created_at)
		FROM `+s.sql.sessions+` AS c LEFT JOIN `+s.sql.messages+` AS g ON g.owner_id = c.owner_id AND g.session_id = c.id
		WHERE c.owner_id = $1 AND c.id = $2 GROUP BY c.agent_id`, owner, sessionID).Scan(&agent, &turns, &first, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("session %q: %w", sessionID, ErrNotFound)
	}
	if err != nil {
		return nil, s.dbErr("counting the session's turns", err)
	}
	if turns < MinEpisodeUserTurns {
		return nil, nil
	}
	msgs, err := s.lastMessages(ctx, s.pool, owner, sessionID, maxEpisodeMessages)
	if err != nil {
		return nil, err
	}
	lines := make([]string, 0, len(msgs))
	for _, m := range msgs {
		lines = append(lines, s.summaryLine(m))
	}
	input, _ := newestWithin(lines, maxExtractPromptChars)
	summary, method := s.summarize(ctx, strings.Split(input, "\n"))
	e = Episode{ID: newID(), Owner: owner, SessionID: sessionID, Agent: agent, Summary: summary, Method: method,
		UserTurns: turns, StartedAt: first.UTC(), EndedAt: last.UTC()}
	vec := s.embedSummary(ctx, summary)
	// Two writers of the same episode: the first wins, the second reads it.
	e, err = scanEpisode(s.pool.QueryRow(ctx, `WITH ins AS (
			INSERT INTO `+s.sql.episodes+` AS e (id, owner_id, session_id, agent_id, summary, method, user_turns, started_at, ended_at, embedding)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (owner_id, session_id) DO NOTHING
			RETURNING `+episodeColumns+`)
		SELECT * FROM ins UNION ALL
		SELECT `+episodeColumns+` FROM `+s.sql.episodes+` AS e WHERE e.owner_id = $2 AND e.session_id = $3 AND NOT EXISTS (SELECT 1 FROM ins)`,
		e.ID, owner, sessionID, agent, summary, method, turns, e.StartedAt, e.EndedAt, vec))
	if err != nil {
		return nil, s.dbErr("writing the episode", err)
	}
	return &e, nil
}

// idleEpisodes writes the episodes of sessions that went idle (no message
// for conversation.archiveAfter, else sessionIdleTTL) before the sessions
// job archives or deletes them; at most maxIdleEpisodesPerRun a run. res
// is not changed: the job's counts stay those of sessions archived and deleted.
func (s *Store) idleEpisodes(ctx context.Context, opts JobOptions) error {
	c := s.policy.Conversation
	idle := c.ArchiveAfter
	if idle == 0 || (c.SessionIdleTTL > 0 && c.SessionIdleTTL < idle) {
		idle = c.SessionIdleTTL
	}
	if idle == 0 || opts.DryRun {
		return nil
	}
	rows, err := s.pool.Query(ctx, `SELECT c.owner_id, c.id FROM `+s.sql.sessions+` AS c
		WHERE c.last_active_at < now() - make_interval(secs => $1)
			AND NOT EXISTS (SELECT 1 FROM `+s.sql.episodes+` AS e WHERE e.owner_id = c.owner_id AND e.session_id = c.id)
			AND (SELECT count(*) FROM `+s.sql.messages+` AS g WHERE g.owner_id = c.owner_id AND g.session_id = c.id AND g.role = 'user') >= $2
		ORDER BY c.last_active_at LIMIT $3`, time.Duration(idle).Seconds(), MinEpisodeUserTurns, maxIdleEpisodesPerRun)
	if err != nil {
		return s.dbErr("finding idle sessions without an episode", err)
	}
	type key struct{ owner, id string }
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (key, error) {
		var k key
		return k, r.Scan(&k.owner, &k.id)
	})
	if err != nil {
		return s.dbErr("finding idle sessions without an episode", err)
	}
	for _, k := range keys {
		if _, err := s.writeEpisode(ctx, k.owner, k.id); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("writing the episode of an idle session: %w", err)
		}
	}
	return nil
}

// EndSession ends a session: archives it and records its end time (once;
// ending an ended session only retries what is missing), writes its
// episode when it has at least MinEpisodeUserTurns user messages, and
// extracts facts when conversation.extractOnEnd is on and an LLM exists.
// Errors: ValidationError; ErrNotFound; ErrUpstream from extraction (the
// session stays ended, the episode is written, the watermark unchanged).
func (s *Store) EndSession(ctx context.Context, req EndSessionRequest) (*EndSessionResult, error) {
	fe := &fieldErrors{}
	sessionKey(fe, req.Owner, req.SessionID)
	fe.source(req.Source)
	if err := fe.err(); err != nil {
		return nil, err
	}
	res := &EndSessionResult{}
	// least(ended_at, now()): an ended session keeps its end (least ignores
	// NULL; Citus refuses coalesce around now() in an UPDATE).
	c, err := scanSession(s.pool.QueryRow(ctx, `UPDATE `+s.sql.sessions+` AS c SET archived = true, ended_at = least(c.ended_at, now())
		WHERE c.owner_id = $1 AND c.id = $2 RETURNING `+sessionColumns+`, c.ended_at`, req.Owner, req.SessionID), &res.EndedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("session %q: %w", req.SessionID, ErrNotFound)
	}
	if err != nil {
		return nil, s.dbErr("ending the session", err)
	}
	res.Session, res.EndedAt = c, res.EndedAt.UTC()
	if res.Episode, err = s.writeEpisode(ctx, req.Owner, req.SessionID); err != nil {
		return nil, err
	}
	switch {
	case !s.policy.Conversation.ExtractOnEnd:
		res.ExtractionSkipped = "policy"
	case s.llm == nil:
		res.ExtractionSkipped = "no-llm"
	default:
		res.Extraction, err = s.ExtractSession(ctx, SessionExtractRequest(req))
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// SearchEpisodes ranks an owner's episodes by hybrid score with recency
// (EpisodeHit), or lists them newest first when the query is empty.
// Errors: ValidationError.
func (s *Store) SearchEpisodes(ctx context.Context, req EpisodeSearchRequest) ([]EpisodeHit, error) {
	fe := &fieldErrors{}
	fe.owner(req.Owner)
	fe.scope(req.Agent, "")
	if req.Query != "" {
		fe.text("query", req.Query, s.policy.Limits.MaxQueryBytes)
	}
	limit := req.Limit
	if limit == 0 {
		limit = defaultEpisodeLimit
	}
	if limit < 1 || limit > maxEpisodeLimit {
		fe.add("limit", "%d must be within 1..%d", req.Limit, maxEpisodeLimit)
	}
	if err := fe.err(); err != nil {
		return nil, err
	}
	return s.searchEpisodes(ctx, req.Owner, req.Agent, req.Query, limit)
}

func (s *Store) searchEpisodes(ctx context.Context, owner, agent, query string, limit int) ([]EpisodeHit, error) {
	a := &args{}
	where := `e.owner_id = ` + a.add(owner)
	if agent != "" {
		where += ` AND e.agent_id IN ('', ` + a.add(agent) + `)`
	}
	recency := `exp(-ln(2) / ` + a.add(episodeHalfLife.Seconds()) + `::float8 * greatest(0, extract(epoch FROM now() - e.ended_at)))`
	vs, ts, from := `0::float8`, `0::float8`, s.sql.episodes+` AS e`
	if query != "" {
		vecs, err := s.embedder.Embed(ctx, []string{s.redactor.redacted(query)})
		if err != nil || len(vecs) != 1 {
			return nil, fmt.Errorf("embedding the query: %w", err)
		}
		vs = `coalesce(1 - (e.embedding <=> ` + a.add(pgv.NewVector(vecs[0])) + `), 0)`
		from += `, (SELECT ` + orQuery(a.add(query)) + `) AS q(q)`
		ts = `CASE WHEN e.tsv @@ q.q THEN ts_rank_cd(e.tsv, q.q, 32) ELSE 0 END`
	}
	w := s.policy.Search
	var sql string
	if query == "" {
		sql = `SELECT ` + episodeColumns + `, 0::float8, 0::float8, ` + recency + ` FROM ` + from + ` WHERE ` + where +
			` ORDER BY e.ended_at DESC, e.id LIMIT ` + a.add(limit)
	} else {
		sql = `SELECT * FROM (SELECT ` + episodeColumns + `, ` + vs + ` AS vs, ` + ts + ` AS ts, ` + recency + ` AS rs
				FROM ` + from + ` WHERE ` + where + `) AS r
			ORDER BY ` + a.add(w.VectorWeight) + `::float8 * r.vs + ` + a.add(w.TextWeight) + `::float8 * r.ts + ` +
			a.add(w.DecayWeight) + `::float8 * r.rs DESC, r.ended_at DESC, r.id LIMIT ` + a.add(limit)
	}
	rows, err := s.pool.Query(ctx, sql, a.list...)
	if err != nil {
		return nil, s.dbErr("searching episodes", err)
	}
	defer rows.Close()
	hits := []EpisodeHit{}
	for rows.Next() {
		var h EpisodeHit
		if h.Episode, err = scanEpisode(rows, &h.VectorScore, &h.TextScore, &h.RecencyScore); err != nil {
			return nil, s.dbErr("searching episodes", err)
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
		return nil, s.dbErr("searching episodes", err)
	}
	return hits, nil
}
