package longterm

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
)

const (
	defaultChangelogPage = 50
	// MaxChangelogPage bounds one page of Changelog.
	MaxChangelogPage = 500
)

// documentKey checks owner, agent and kind of a document request.
func documentKey(fe *core.FieldErrors, owner, agent string, kind DocumentKind) {
	fe.Owner(owner)
	fe.Scope(agent, "")
	if kind != DocProfile && kind != DocConstraints {
		fe.Add("kind", "%q must be profile or constraints", kind)
	}
}

// GetDocument reads the profile or constraints of (owner, agent), current
// or at req.Version. A never-written document is version 0 with empty
// content. Errors: ValidationError; core.ErrNotFound (no such past version).
func (s *Store) GetDocument(ctx context.Context, req GetDocumentRequest) (*Document, error) {
	fe := &core.FieldErrors{}
	documentKey(fe, req.Owner, req.Agent, req.Kind)
	if req.Version < 0 {
		fe.Add("version", "%d must not be negative", req.Version)
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	if req.Version == 0 {
		return s.currentDocument(ctx, s.core.Pool, req.Owner, req.Agent, req.Kind, "")
	}
	return s.documentAt(ctx, req.Owner, req.Agent, req.Kind, req.Version)
}

// currentDocument reads the current version with q (lock "" or " FOR UPDATE").
func (s *Store) currentDocument(ctx context.Context, q core.Querier, owner, agent string, kind DocumentKind, lock string) (*Document, error) {
	d := &Document{Owner: owner, Agent: agent, Kind: kind}
	var src string
	err := q.QueryRow(ctx, `SELECT version, content, source, updated_at FROM `+s.sql.documents+`
		WHERE owner_id = $1 AND agent_id = $2 AND kind = $3`+lock, owner, agent, string(kind)).
		Scan(&d.Version, &d.Content, &src, &d.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, nil
	}
	if err != nil {
		return nil, core.DBErr("reading the "+string(kind), err)
	}
	d.Source, d.UpdatedAt = core.Source(src), d.UpdatedAt.UTC()
	return d, nil
}

// documentAt reads a past version: the after text of its change. Version 0
// (before the first write) is the empty document.
func (s *Store) documentAt(ctx context.Context, owner, agent string, kind DocumentKind, version int64) (*Document, error) {
	d := &Document{Owner: owner, Agent: agent, Kind: kind, Version: version}
	if version == 0 {
		return d, nil
	}
	var src string
	err := s.core.Pool.QueryRow(ctx, `SELECT after, source, created_at FROM `+s.sql.docChanges+`
		WHERE owner_id = $1 AND agent_id = $2 AND kind = $3 AND version = $4`, owner, agent, string(kind), version).
		Scan(&d.Content, &src, &d.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s version %d: %w", kind, version, core.ErrNotFound)
	}
	if err != nil {
		return nil, core.DBErr("reading the "+string(kind), err)
	}
	d.Source, d.UpdatedAt = core.Source(src), d.UpdatedAt.UTC()
	return d, nil
}

// PutDocument writes a new version of a document and records before/after
// in the changelog, in one transaction under the owner's lock. Content is
// redacted and guarded like a memory (at most MaxDocumentBytes stored); an
// empty content clears the document (still a new version). Errors:
// ValidationError; core.ErrProtected (constraints with a source other than
// user); ErrConflict (IfVersion does not match).
func (s *Store) PutDocument(ctx context.Context, req PutDocumentRequest) (*Document, error) {
	fe := &core.FieldErrors{}
	documentKey(fe, req.Owner, req.Agent, req.Kind)
	src := fe.Source(req.Source)
	if req.Content != "" {
		fe.Text("content", req.Content, 4*MaxDocumentBytes)
	}
	if req.IfVersion != nil && *req.IfVersion < 0 {
		fe.Add("ifVersion", "%d must not be negative", *req.IfVersion)
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	// Constraints are the user's rules for the agent: like a protected
	// category, nobody else may change them.
	if req.Kind == DocConstraints && src != core.SourceUser {
		return nil, fmt.Errorf("constraints: %w", core.ErrProtected)
	}
	content := ""
	if req.Content != "" {
		c, err := s.core.CleanWithin("content", req.Content, MaxDocumentBytes, fe)
		if err != nil {
			return nil, err
		}
		// A flagged memory is kept out of context; a document is rendered
		// whole into every prompt, so in Flag mode too a document the guard
		// objects to is refused rather than stored with a flag nobody reads.
		if len(c.Flags) > 0 {
			fe.Add("content", "rejected by the injection guard: looks like a prompt injection (a profile or constraints document is always rendered into the prompt)")
			return nil, fe.Err()
		}
		content = c.Text
	}
	var out *Document
	err := s.core.InTx(ctx, func(tx pgx.Tx) error {
		if err := s.core.LockOwner(ctx, tx, req.Owner); err != nil {
			return err
		}
		cur, err := s.currentDocument(ctx, tx, req.Owner, req.Agent, req.Kind, " FOR UPDATE")
		if err != nil {
			return err
		}
		if req.IfVersion != nil && *req.IfVersion != cur.Version {
			return core.Conflictf("%s is at version %d, not %d", req.Kind, cur.Version, *req.IfVersion)
		}
		if cur.Version == 0 {
			if err := s.checkDocumentsQuota(ctx, tx, req.Owner); err != nil {
				return err
			}
		}
		if out, err = s.writeDocument(ctx, tx, cur, content, src); err != nil {
			return err
		}
		return s.pruneVersions(ctx, tx, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkDocumentsQuota refuses a write that would create one more document
// of an owner at limits.maxDocumentsPerOwner. Agent ids are the client's
// choice, so without it the documents of one owner (each keeping up to
// maxDocumentVersions versions in the changelog) would grow with every
// new agent id. The caller holds the owner's lock: no concurrent write
// can create a document between the count and its insert.
func (s *Store) checkDocumentsQuota(ctx context.Context, tx pgx.Tx, owner string) error {
	return core.OneMoreOwnerRow(ctx, tx, s.sql.documents, owner, core.QuotaDocumentsPerOwner, s.core.Policy.Limits.MaxDocumentsPerOwner, "documents",
		"nothing was written; write the documents of the agents the owner has (or the shared one, agent empty), or raise the limit")
}

// writeDocument stores version cur.Version+1 and its change. The update's
// time is EXCLUDED.updated_at, the column's default now() (Citus refuses a
// non-immutable function in DO UPDATE SET).
func (s *Store) writeDocument(ctx context.Context, tx pgx.Tx, cur *Document, content string, src core.Source) (*Document, error) {
	d := &Document{Owner: cur.Owner, Agent: cur.Agent, Kind: cur.Kind, Version: cur.Version + 1, Content: content, Source: src}
	err := tx.QueryRow(ctx, `INSERT INTO `+s.sql.documents+` (owner_id, agent_id, kind, version, content, source)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (owner_id, agent_id, kind) DO UPDATE SET version = EXCLUDED.version,
			content = EXCLUDED.content, source = EXCLUDED.source, updated_at = EXCLUDED.updated_at
		RETURNING updated_at`, d.Owner, d.Agent, string(d.Kind), d.Version, content, string(src)).Scan(&d.UpdatedAt)
	if err != nil {
		return nil, core.DBErr("writing the "+string(d.Kind), err)
	}
	d.UpdatedAt = d.UpdatedAt.UTC()
	_, err = tx.Exec(ctx, `INSERT INTO `+s.sql.docChanges+` (owner_id, agent_id, kind, version, source, actor_id, before, after)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		d.Owner, d.Agent, string(d.Kind), d.Version, string(src), core.ActorID(ctx), cur.Content, content)
	if err != nil {
		return nil, core.DBErr("recording the change of the "+string(d.Kind), err)
	}
	return d, nil
}

// pruneVersions deletes the changes of d's document older than its newest
// limits.maxDocumentVersions versions, in the write's transaction, except
// the versions a session's snapshot pins: that session's context renders
// them. Sessions pin versions under the owner's lock (CreateSession,
// AdvanceSnapshot) which the write holds, so no pin can appear unseen.
// Every change keeps its before and after texts, so what remains of the
// changelog still reads on its own; GetDocument of a pruned version is
// core.ErrNotFound.
func (s *Store) pruneVersions(ctx context.Context, tx pgx.Tx, d *Document) error {
	oldestKept := d.Version - int64(s.core.Policy.Limits.MaxDocumentVersions) + 1
	if oldestKept <= 1 {
		return nil
	}
	pin := "profile_version"
	if d.Kind == DocConstraints {
		pin = "constraints_version"
	}
	_, err := tx.Exec(ctx, `DELETE FROM `+s.sql.docChanges+` AS d
		WHERE d.owner_id = $1 AND d.agent_id = $2 AND d.kind = $3 AND d.version < $4
			AND NOT EXISTS (SELECT 1 FROM `+s.sql.sessions+` AS c
				WHERE c.owner_id = d.owner_id AND c.agent_id = d.agent_id AND c.`+pin+` = d.version)`,
		d.Owner, d.Agent, string(d.Kind), oldestKept)
	return core.DBErr("pruning old versions of the "+string(d.Kind), err)
}

// Changelog pages through the writes of an owner's documents, newest
// first: at most req.Limit (0 = 50, at most 500) and the byte cap per
// page, from req.Cursor. Errors: ValidationError.
func (s *Store) Changelog(ctx context.Context, req ChangelogRequest) (*ChangelogPage, error) {
	fe := &core.FieldErrors{}
	fe.Owner(req.Owner)
	if req.Agent != nil {
		fe.Scope(*req.Agent, "")
	}
	if req.Scope != "" && req.Scope != DocProfile && req.Scope != DocConstraints {
		fe.Add("scope", "%q must be profile, constraints or empty (both)", req.Scope)
	}
	limit := fe.Limit(req.Limit, defaultChangelogPage, MaxChangelogPage)
	before, err := core.DecodeSerialCursor(req.Cursor)
	fe.Cursor(err)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	a := &core.Args{}
	where := `owner_id = ` + a.Add(req.Owner)
	if req.Agent != nil {
		where += ` AND agent_id = ` + a.Add(*req.Agent)
	}
	if req.Scope != "" {
		where += ` AND kind = ` + a.Add(string(req.Scope))
	}
	if before > 0 {
		where += ` AND id < ` + a.Add(before)
	}
	rows, err := s.core.Pool.Query(ctx, `SELECT id, owner_id, agent_id, kind, version, source, actor_id, before, after, created_at
		FROM `+s.sql.docChanges+` WHERE `+where+` ORDER BY id DESC LIMIT `+a.Add(limit+1), a.List...)
	if err != nil {
		return nil, core.DBErr("reading the changelog", err)
	}
	page := &ChangelogPage{Items: []ChangelogEntry{}}
	scan, err := core.ScanPage(rows, limit, core.NewAnswerBytes(s.core.AnswerCap(req.MaxBytes), page), scanChange)
	if err != nil {
		return nil, core.DBErr("reading the changelog", err)
	}
	page.Items = scan.Items
	page.PageBounds = scan.Bounds(func(e ChangelogEntry) string { return core.EncodeSerialCursor(e.ID) })
	return page, nil
}

func scanChange(rows pgx.Rows) (ChangelogEntry, error) {
	var e ChangelogEntry
	var kind, src string
	if err := rows.Scan(&e.ID, &e.Owner, &e.Agent, &kind, &e.Version, &src, &e.ActorID, &e.Before, &e.After, &e.At); err != nil {
		return ChangelogEntry{}, err
	}
	e.Kind, e.Source, e.At = DocumentKind(kind), core.Source(src), e.At.UTC()
	return e, nil
}

// GetSnapshot returns the document versions a session's context renders.
// Errors: ValidationError; core.ErrNotFound (no such session).
func (s *Store) GetSnapshot(ctx context.Context, owner, sessionID string) (*SessionSnapshot, error) {
	return s.snapshot(ctx, owner, sessionID, false, `SELECT c.agent_id, c.profile_version, c.constraints_version
		FROM `+s.sql.sessions+` AS c WHERE c.owner_id = $1 AND c.id = $2`)
}

// AdvanceSnapshot moves a session's snapshot to the current versions of its
// agent's profile and constraints, under the owner's lock (see
// pruneVersions). Errors: ValidationError; core.ErrNotFound.
func (s *Store) AdvanceSnapshot(ctx context.Context, owner, sessionID string) (*SessionSnapshot, error) {
	return s.snapshot(ctx, owner, sessionID, true, `UPDATE `+s.sql.sessions+` AS c SET
			profile_version = `+docVersionSQL(s.sql.documents, "c.owner_id", "c.agent_id", DocProfile)+`,
			constraints_version = `+docVersionSQL(s.sql.documents, "c.owner_id", "c.agent_id", DocConstraints)+`
		WHERE c.owner_id = $1 AND c.id = $2
		RETURNING c.agent_id, c.profile_version, c.constraints_version`)
}

// snapshot runs sql (reading or moving a snapshot); underOwnerLock runs it
// in a transaction under the owner's lock.
func (s *Store) snapshot(ctx context.Context, owner, sessionID string, underOwnerLock bool, sql string) (*SessionSnapshot, error) {
	fe := &core.FieldErrors{}
	fe.SessionKey(owner, sessionID)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	snap := &SessionSnapshot{Owner: owner, SessionID: sessionID}
	scan := func(q core.Querier) error {
		return q.QueryRow(ctx, sql, owner, sessionID).Scan(&snap.Agent, &snap.ProfileVersion, &snap.ConstraintsVersion)
	}
	var err error
	if underOwnerLock {
		err = s.core.InTx(ctx, func(tx pgx.Tx) error {
			if err := s.core.LockOwner(ctx, tx, owner); err != nil {
				return err
			}
			return scan(tx)
		})
	} else {
		err = scan(s.core.Pool)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("session %q: %w", sessionID, core.ErrNotFound)
	}
	if err != nil {
		return nil, core.DBErr("reading the session's snapshot", err)
	}
	return snap, nil
}

// docVersionSQL is the current version of a document of documents (0 =
// none), for the owner and agent expressions given.
func docVersionSQL(documents, owner, agent string, kind DocumentKind) string {
	return `coalesce((SELECT d.version FROM ` + documents + ` AS d
		WHERE d.owner_id = ` + owner + ` AND d.agent_id = ` + agent + ` AND d.kind = '` + string(kind) + `'), 0)`
}

// ContextDocuments returns the constraints and profile a context of owner
// and agent renders: the session's snapshot versions when a session is
// given, else the current ones.
func (s *Store) ContextDocuments(ctx context.Context, owner, agent, session string) (constraints, profile *Document, err error) {
	var pv, cv int64 = -1, -1
	if session != "" {
		snap, err := s.GetSnapshot(ctx, owner, session)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			return nil, nil, err
		}
		if snap != nil { // a session id that names no conversation session scopes memories only
			agent, pv, cv = snap.Agent, snap.ProfileVersion, snap.ConstraintsVersion
		}
	}
	get := func(kind DocumentKind, v int64) (*Document, error) {
		if v < 0 {
			return s.currentDocument(ctx, s.core.Pool, owner, agent, kind, "")
		}
		return s.documentAt(ctx, owner, agent, kind, v)
	}
	if constraints, err = get(DocConstraints, cv); err != nil {
		return nil, nil, err
	}
	if profile, err = get(DocProfile, pv); err != nil {
		return nil, nil, err
	}
	return constraints, profile, nil
}

// Erased counts the rows EraseOwner deleted.
type Erased struct{ Episodes, Documents, Changelog int64 }

// EraseOwner deletes the owner's episodes, documents and changes in tx
// (the façade's EraseOwner erases the rest of the owner in the same
// transaction), counting each.
func (s *Store) EraseOwner(ctx context.Context, tx pgx.Tx, owner string) (Erased, error) {
	var res Erased
	err := core.EraseOwnerRows(ctx, tx, owner,
		core.OwnerRows{Table: s.sql.episodes, What: "episodes", Count: &res.Episodes},
		core.OwnerRows{Table: s.sql.documents, What: "documents", Count: &res.Documents},
		core.OwnerRows{Table: s.sql.docChanges, What: "changelog", Count: &res.Changelog})
	return res, err
}
