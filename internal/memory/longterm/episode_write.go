package longterm

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/conversation"
	"github.com/engram-dev/engram/internal/memory/core"
)

// Writing an episode happens in two steps: a plan read and summarized
// outside any transaction (the summary may wait for the LLM), then one
// short transaction under the owner's lock that counts the owner's
// episodes against limits.maxEpisodesPerOwner, inserts the episode and,
// for EndSession, archives the session. Concurrent writers of one owner's
// episodes are serialized by the lock, so none can pass the quota, and a
// refused end writes nothing at all.

// settleAttempts bounds how often a plan is made again because messages
// arrived while it was summarized; the last attempt commits its plan.
const settleAttempts = 3

// maxEpisodePromptChars bounds the conversation an episode summary is made
// from; the newest part is kept.
const maxEpisodePromptChars = 8000

// episodePlan is what settling a session's episode will write.
type episodePlan struct {
	// messages is the session's message count the plan was made from.
	messages int64
	// existing is the episode the session already has (nothing to write).
	existing *Episode
	// episode is the new episode (nil: fewer than MinEpisodeUserTurns user
	// messages, or existing set), with its embedding.
	episode *Episode
	vec     conversation.Embedded
}

// Settled is what SettleEpisode did.
type Settled struct {
	Episode *Episode             // nil: the session has none
	Session conversation.Session // after archiving (end only)
	EndedAt time.Time
}

// errSessionMoved: messages were appended between the plan and its commit.
var errSessionMoved = errors.New("the session changed while its episode was summarized")

// SettleEpisode writes the episode of a session that has at least
// MinEpisodeUserTurns user messages (or keeps the one it has) and, when
// end is set, archives the session and records its end, in one
// transaction. Errors: core.ErrNotFound; *core.QuotaError (nothing written).
func (s *Store) SettleEpisode(ctx context.Context, owner, id string, end bool) (*Settled, error) {
	for attempt := 1; ; attempt++ {
		plan, err := s.planEpisode(ctx, owner, id)
		if err != nil {
			return nil, err
		}
		out, err := s.commitEpisode(ctx, owner, id, plan, end, attempt == settleAttempts)
		if errors.Is(err, errSessionMoved) {
			continue
		}
		return out, err
	}
}

// planEpisode reads the session and, when it needs an episode, summarizes
// it. An owner already at its episode quota is refused here, before any
// LLM call; commitEpisode decides for good under the lock.
func (s *Store) planEpisode(ctx context.Context, owner, id string) (*episodePlan, error) {
	plan := &episodePlan{}
	e, err := scanEpisode(s.core.Pool.QueryRow(ctx, `SELECT `+episodeColumns+` FROM `+s.sql.episodes+` AS e
		WHERE e.owner_id = $1 AND e.session_id = $2`, owner, id))
	switch {
	case err == nil:
		plan.existing = &e
		return plan, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, core.DBErr("reading the episode", err)
	}
	var turns int
	var agent string
	var first, last *time.Time
	err = s.core.Pool.QueryRow(ctx, `SELECT c.agent_id, c.message_count, count(g.seq) FILTER (WHERE g.role = 'user'), min(g.created_at), max(g.created_at)
		FROM `+s.sql.sessions+` AS c LEFT JOIN `+s.sql.messages+` AS g ON g.owner_id = c.owner_id AND g.session_id = c.id
		WHERE c.owner_id = $1 AND c.id = $2 GROUP BY c.agent_id, c.message_count`, owner, id).Scan(&agent, &plan.messages, &turns, &first, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("session %q: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, core.DBErr("counting the session's turns", err)
	}
	if turns < MinEpisodeUserTurns {
		return plan, nil
	}
	if err := s.checkEpisodeQuota(ctx, s.core.Pool, owner); err != nil {
		return nil, err
	}
	summary, method, err := s.summarizeSession(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	plan.episode = &Episode{ID: core.NewID(), Owner: owner, SessionID: id, Agent: agent, Summary: summary, Method: method,
		UserTurns: turns, StartedAt: first.UTC(), EndedAt: last.UTC()}
	plan.vec = s.conv.EmbedSummary(ctx, summary)
	return plan, nil
}

// summarizeSession summarizes the newest messages of a session (LLM, else extractive).
func (s *Store) summarizeSession(ctx context.Context, owner, id string) (string, string, error) {
	msgs, err := s.conv.LastMessages(ctx, s.core.Pool, owner, id, maxEpisodeMessages)
	if err != nil {
		return "", "", err
	}
	in := make([]conversation.SummaryInput, len(msgs))
	for i, m := range msgs {
		in[i] = s.conv.SummaryInput(m)
	}
	summary, method := s.conv.Summarize(ctx, newestWithin(in, maxEpisodePromptChars))
	return summary, method, nil
}

// newestWithin is the newest inputs whose lines fit in maxChars together,
// whole: a message cut in two would hand the summarizers a fragment that
// starts mid-word. When the newest alone is longer, it is kept, its LLM
// line cut to its last maxChars characters (the extractive summarizer
// still reads the whole message, picking sentences of it).
func newestWithin(in []conversation.SummaryInput, maxChars int) []conversation.SummaryInput {
	left := maxChars
	first := len(in)
	for first > 0 {
		n := utf8.RuneCountInString(in[first-1].Line) + 1
		if n > left {
			break
		}
		left -= n
		first--
	}
	if first == len(in) && first > 0 {
		last := in[first-1]
		last.Line, _ = core.NewestWithin([]string{last.Line}, maxChars)
		return []conversation.SummaryInput{last}
	}
	return in[first:]
}

// checkEpisodeQuota refuses one more episode of an owner at
// limits.maxEpisodesPerOwner.
func (s *Store) checkEpisodeQuota(ctx context.Context, q core.Querier, owner string) error {
	return core.OneMoreOwnerRow(ctx, q, s.sql.episodes, owner, core.QuotaEpisodesPerOwner, s.core.Policy.Limits.MaxEpisodesPerOwner, "episodes",
		"nothing was written; raise the limit, or erase the owner's data, to record more episodes")
}

// commitEpisode writes plan in one transaction under the owner's lock.
// Unless last, a session that received messages since the plan is
// errSessionMoved (plan again); an episode written meanwhile by another
// writer is kept and returned.
func (s *Store) commitEpisode(ctx context.Context, owner, id string, plan *episodePlan, end, last bool) (*Settled, error) {
	out := &Settled{Episode: plan.existing}
	dual := false
	err := s.core.InTx(ctx, func(tx pgx.Tx) error {
		if err := s.core.LockOwner(ctx, tx, owner); err != nil {
			return err
		}
		// Before any table with a vector (core.State.NextHeld).
		if err := s.conv.HoldNext(ctx, tx, &plan.vec); err != nil {
			return err
		}
		sess, err := s.conv.LockSession(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		if plan.existing == nil && sess.MessageCount != plan.messages && !last {
			return errSessionMoved
		}
		if plan.episode != nil {
			if out.Episode, err = s.insertEpisode(ctx, tx, plan); err != nil {
				return err
			}
			dual = out.Episode.ID == plan.episode.ID
		}
		if !end {
			return nil
		}
		out.Session, err = conversation.ScanSession(tx.QueryRow(ctx, `UPDATE `+s.sql.sessions+` AS c SET archived = true, ended_at = least(c.ended_at, now())
			WHERE c.owner_id = $1 AND c.id = $2 RETURNING `+conversation.SessionColumns+`, c.ended_at`, owner, id), &out.EndedAt)
		out.EndedAt = out.EndedAt.UTC()
		return core.DBErr("ending the session", err)
	})
	if err != nil {
		return nil, err
	}
	if dual {
		s.conv.NextDone(plan.vec)
	}
	return out, nil
}

// insertEpisode inserts the planned episode after checking the quota, or
// returns the one another writer stored first (both under the owner's lock).
func (s *Store) insertEpisode(ctx context.Context, tx pgx.Tx, plan *episodePlan) (*Episode, error) {
	e := plan.episode
	got, err := scanEpisode(tx.QueryRow(ctx, `SELECT `+episodeColumns+` FROM `+s.sql.episodes+` AS e
		WHERE e.owner_id = $1 AND e.session_id = $2`, e.Owner, e.SessionID))
	if err == nil {
		return &got, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, core.DBErr("reading the episode", err)
	}
	if err := s.checkEpisodeQuota(ctx, tx, e.Owner); err != nil {
		return nil, err
	}
	textConfig, err := s.core.WriteTextConfig(ctx, tx) // the stored vector's (migration 19)
	if err != nil {
		return nil, err
	}
	args := []any{e.ID, e.Owner, e.SessionID, e.Agent, e.Summary, e.Method, e.UserTurns, e.StartedAt, e.EndedAt, plan.vec.Vec, textConfig}
	col, val := "", ""
	if plan.vec.Next != nil { // a dual write during a re-embed (core.Next)
		col, val, args = ", embedding_next", ", $12", append(args, plan.vec.Next)
	}
	got, err = scanEpisode(tx.QueryRow(ctx, `INSERT INTO `+s.sql.episodes+` AS e (id, owner_id, session_id, agent_id, summary, method, user_turns, started_at, ended_at, embedding,
			tsv_config, tsv_local`+col+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, `+core.TextLocal("$11", "$5")+val+`) RETURNING `+episodeColumns, args...))
	if err != nil {
		return nil, core.DBErr("writing the episode", err)
	}
	return &got, nil
}
