package conversation

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
)

const (
	defaultSessionPage = 50
	// MaxSessionPage bounds one page of ListSessions.
	MaxSessionPage = 500
	maxTitleBytes  = core.MaxSessionTitleBytes
)

// SessionColumns are selected (with alias c) wherever a Session is
// returned; ScanSession reads them in this order.
const SessionColumns = `c.id, c.owner_id, c.agent_id, c.title, c.archived, c.created_at, c.last_active_at,
	c.message_count, c.token_count, c.summarized_through, c.token_count - c.summarized_tokens, c.summary_count`

func ScanSession(row pgx.Row, extra ...any) (Session, error) {
	var c Session
	dest := []any{&c.ID, &c.Owner, &c.Agent, &c.Title, &c.Archived, &c.CreatedAt, &c.LastActiveAt,
		&c.MessageCount, &c.TokenCount, &c.SummarizedThrough, &c.UnsummarizedTokens, &c.SummaryCount}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return Session{}, err
	}
	c.CreatedAt, c.LastActiveAt = c.CreatedAt.UTC(), c.LastActiveAt.UTC()
	return c, nil
}

// checkTitle checks a session title: optional, one line of printable text.
func checkTitle(fe *core.FieldErrors, t string) {
	if t == "" {
		return
	}
	fe.Text("title", t, maxTitleBytes)
}

// CreateSession creates a session of req.Owner. An id the owner already
// uses is ErrConflict; another owner may use the same id (ids are per
// owner). An owner at limits.maxSessionsPerOwner gets a *QuotaError: the
// count and the insert run under the owner's lock (lockOwner), so
// concurrent creations cannot pass the quota.
func (s *Store) CreateSession(ctx context.Context, req CreateSessionRequest) (*Session, error) {
	fe := &core.FieldErrors{}
	fe.Owner(req.Owner)
	if req.ID != "" && !core.ValidScopeID(req.ID) {
		fe.Add("id", core.ScopeIDRule)
	}
	if req.Agent != "" && !core.ValidScopeID(req.Agent) {
		fe.Add("agent", core.ScopeIDRule)
	}
	checkTitle(fe, req.Title)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	id := req.ID
	if id == "" {
		id = core.NewID()
	}
	var c Session
	err := s.core.InTx(ctx, func(tx pgx.Tx) error {
		if err := s.core.LockOwner(ctx, tx, req.Owner); err != nil {
			return err
		}
		if err := core.OneMoreOwnerRow(ctx, tx, s.sql.sessions, req.Owner, core.QuotaSessionsPerOwner, s.core.Policy.Limits.MaxSessionsPerOwner, "sessions",
			"delete sessions the owner no longer needs, or raise the limit"); err != nil {
			return err
		}
		// The session pins the current versions of its agent's profile and
		// constraints (its snapshot; AdvanceSnapshot moves it). Under the
		// owner's lock, so PutDocument cannot prune the version pinned here;
		// read before the insert, because Citus refuses subqueries in an
		// INSERT.
		var profile, constraints int64
		if err := tx.QueryRow(ctx, `SELECT `+s.docs.PinnedVersionsSQL("$1", "$2"),
			req.Owner, req.Agent).Scan(&profile, &constraints); err != nil {
			return core.DBErr("reading the agent's document versions", err)
		}
		var err error
		c, err = ScanSession(tx.QueryRow(ctx, `INSERT INTO `+s.sql.sessions+` AS c (owner_id, id, agent_id, title, profile_version, constraints_version)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (owner_id, id) DO NOTHING RETURNING `+SessionColumns,
			req.Owner, id, req.Agent, req.Title, profile, constraints))
		if errors.Is(err, pgx.ErrNoRows) {
			return core.Conflictf("session %q already exists", id)
		}
		return core.DBErr("creating session", err)
	})
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// GetSession returns one session with its statistics; another owner's id is core.ErrNotFound.
func (s *Store) GetSession(ctx context.Context, owner, id string) (*Session, error) {
	fe := &core.FieldErrors{}
	fe.SessionKey(owner, id)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	return s.getSession(ctx, s.core.Pool, owner, id, "")
}

// LockSession reads one session in tx and locks its row until tx ends:
// appends, compactions and episodes of the session are serialized there.
func (s *Store) LockSession(ctx context.Context, tx pgx.Tx, owner, id string) (*Session, error) {
	return s.getSession(ctx, tx, owner, id, " FOR UPDATE")
}

// getSession reads one session with q; lock is "" or " FOR UPDATE".
func (s *Store) getSession(ctx context.Context, q core.Querier, owner, id, lock string) (*Session, error) {
	c, err := ScanSession(q.QueryRow(ctx, `SELECT `+SessionColumns+` FROM `+s.sql.sessions+` AS c
		WHERE c.owner_id = $1 AND c.id = $2`+lock, owner, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("session %q: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return nil, core.DBErr("reading session", err)
	}
	return &c, nil
}

// ListSessions pages through an owner's sessions, most recently active
// first. A session that becomes active while a client pages moves to the
// front, so it may be seen twice or not at all in one walk.
func (s *Store) ListSessions(ctx context.Context, req ListSessionsRequest) (*SessionPage, error) {
	fe := &core.FieldErrors{}
	fe.Owner(req.Owner)
	if req.Agent != "" && !core.ValidScopeID(req.Agent) {
		fe.Add("agent", core.ScopeIDRule)
	}
	limit := fe.Limit(req.Limit, defaultSessionPage, MaxSessionPage)
	afterAt, afterID, err := core.DecodeTimeCursor(req.Cursor, core.ValidScopeID)
	fe.Cursor(err)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	a := &core.Args{}
	where := `c.owner_id = ` + a.Add(req.Owner)
	if req.Agent != "" {
		where += ` AND c.agent_id = ` + a.Add(req.Agent)
	}
	if req.Archived != nil {
		where += ` AND c.archived = ` + a.Add(*req.Archived)
	}
	if req.Cursor != "" {
		where += ` AND (c.last_active_at, c.id) < (` + a.Add(afterAt) + `::timestamptz, ` + a.Add(afterID) + `::text)`
	}
	rows, err := s.core.Pool.Query(ctx, `SELECT `+SessionColumns+` FROM `+s.sql.sessions+` AS c WHERE `+where+`
		ORDER BY c.last_active_at DESC, c.id DESC LIMIT `+a.Add(limit+1), a.List...)
	if err != nil {
		return nil, core.DBErr("listing sessions", err)
	}
	page := &SessionPage{Sessions: []Session{}}
	scan, err := core.ScanPage(rows, limit, core.NewAnswerBytes(s.core.AnswerCap(req.MaxBytes), page),
		func(r pgx.Rows) (Session, error) { return ScanSession(r) })
	if err != nil {
		return nil, core.DBErr("listing sessions", err)
	}
	page.Sessions = scan.Items
	page.PageBounds = scan.Bounds(func(c Session) string { return core.EncodeCursor(c.LastActiveAt, c.ID) })
	return page, nil
}

// UpdateSession changes a session's title or archived flag; nil fields stay.
func (s *Store) UpdateSession(ctx context.Context, req UpdateSessionRequest) (*Session, error) {
	fe := &core.FieldErrors{}
	fe.SessionKey(req.Owner, req.ID)
	if req.Title != nil {
		checkTitle(fe, *req.Title)
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	a := &core.Args{}
	set := `title = coalesce(` + a.Add(req.Title) + `::text, title), archived = coalesce(` + a.Add(req.Archived) + `::boolean, archived)`
	row := s.core.Pool.QueryRow(ctx, `UPDATE `+s.sql.sessions+` AS c SET `+set+`
		WHERE c.owner_id = `+a.Add(req.Owner)+` AND c.id = `+a.Add(req.ID)+` RETURNING `+SessionColumns, a.List...)
	c, err := ScanSession(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("session %q: %w", req.ID, core.ErrNotFound)
	}
	if err != nil {
		return nil, core.DBErr("updating session", err)
	}
	return &c, nil
}

// DeleteSession deletes a session with its messages and summaries (one
// transaction; the foreign keys cascade).
func (s *Store) DeleteSession(ctx context.Context, owner, id string) error {
	fe := &core.FieldErrors{}
	fe.SessionKey(owner, id)
	if err := fe.Err(); err != nil {
		return err
	}
	tag, err := s.core.Pool.Exec(ctx, `DELETE FROM `+s.sql.sessions+` WHERE owner_id = $1 AND id = $2`, owner, id)
	if err != nil {
		return core.DBErr("deleting session", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("session %q: %w", id, core.ErrNotFound)
	}
	return nil
}

// Erased counts the rows EraseOwner deleted.
type Erased struct{ Sessions, Messages, Summaries int64 }

// EraseOwner deletes every session, message and summary of owner in tx
// (the façade's EraseOwner erases the rest of the owner in the same
// transaction), counting each.
func (s *Store) EraseOwner(ctx context.Context, tx pgx.Tx, owner string) (Erased, error) {
	var res Erased
	err := core.EraseOwnerRows(ctx, tx, owner,
		core.OwnerRows{Table: s.sql.messages, What: "messages", Count: &res.Messages},
		core.OwnerRows{Table: s.sql.summaries, What: "summaries", Count: &res.Summaries},
		core.OwnerRows{Table: s.sql.sessions, What: "sessions", Count: &res.Sessions})
	return res, err
}
