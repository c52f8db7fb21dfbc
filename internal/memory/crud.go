package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/write"
)

// Get returns one memory of owner, or ErrNotFound when owner has no memory
// with that id.
func (s *Store) Get(ctx context.Context, owner, id string) (*Memory, error) {
	fe := &core.FieldErrors{}
	fe.Owner(owner)
	fe.ID("id", id)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	m, err := (*reader)(s).load(ctx, s.core.Pool, owner, id, false)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// load reads one memory of owner; lock adds FOR UPDATE. Another owner's
// memory is not found, exactly like a missing one (the same error from the
// same query), so a caller learns nothing about ids outside its owner.
func (s *reader) load(ctx context.Context, q core.Querier, owner, id string, lock bool) (Memory, error) {
	sql := `SELECT ` + s.sql.columns + ` FROM ` + s.sql.memories + ` AS m WHERE m.id = $1 AND m.owner_id = $2`
	if lock {
		sql += ` FOR UPDATE`
	}
	m, err := scanMemory(q.QueryRow(ctx, sql, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return Memory{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Memory{}, core.DBErr("reading memory "+id, err)
	}
	return m, nil
}

const (
	defaultListLimit = 50
	maxListLimit     = 500
)

// List pages through owner's memories, newest first (keyset pagination: a
// page is stable while memories are added). By default it lists what search
// and context can return: active memories that have not expired.
func (s *Store) List(ctx context.Context, req ListRequest) (*ListPage, error) {
	fe := &core.FieldErrors{}
	fe.Owner(req.Owner)
	fe.Scope(req.Agent, req.Session)
	if req.Category != "" {
		if _, ok := s.core.Policy.Category(req.Category); !ok {
			fe.Add("category", "%q is not a category of this runtime's policy", req.Category)
		}
	}
	limit := fe.Limit(req.Limit, defaultListLimit, maxListLimit)
	after, afterID, err := decodeCursor(req.Cursor)
	fe.Cursor(err)
	a := &core.Args{}
	filter := filterSQL(fe, a, req.Filter)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	sql := `SELECT ` + s.sql.columns + ` FROM ` + s.sql.memories + ` AS m WHERE m.owner_id = ` + a.Add(req.Owner) +
		scopeFilter(a, req.Agent, req.Session)
	if filter != "" {
		sql += ` AND ` + filter
	}
	if req.Category != "" {
		sql += ` AND m.category = ` + a.Add(req.Category)
	}
	if !req.IncludeInactive {
		sql += ` AND m.active`
		if !req.IncludeExpired {
			sql += ` AND (m.expires_at IS NULL OR m.expires_at > now())`
		}
	}
	if req.ExcludeFlagged {
		sql += notFlagged
	}
	if !after.IsZero() {
		sql += ` AND (m.created_at, m.id) < (` + a.Add(after) + `::timestamptz, ` + a.Add(afterID) + `::uuid)`
	}
	sql += ` ORDER BY m.created_at DESC, m.id DESC LIMIT ` + a.Add(limit+1)
	return (*reader)(s).memoryPage(ctx, "listing memories", req.MaxBytes, limit, createdCursor, sql, a.List...)
}

// createdCursor is the cursor after m in a list ordered by (created_at, id).
func createdCursor(m Memory) string { return core.EncodeCursor(m.CreatedAt, m.ID) }

// memoryPage reads a page of memories (sql has LIMIT limit+1) within the
// byte cap; cursor is the cursor after a memory in sql's order.
func (s *reader) memoryPage(ctx context.Context, what string, maxBytes, limit int, cursor func(Memory) string,
	sql string, args ...any) (*ListPage, error) {
	rows, err := s.core.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, core.DBErr(what, err)
	}
	page := &ListPage{Items: []Memory{}}
	scan, err := core.ScanPage(rows, limit, core.NewAnswerBytes(s.answerCap(maxBytes), page),
		func(r pgx.Rows) (Memory, error) { return scanMemory(r) })
	if err != nil {
		return nil, core.DBErr(what, err)
	}
	page.Items = scan.Items
	page.PageBounds = scan.Bounds(cursor)
	return page, nil
}

// decodeCursor reads a cursor of a page of memories.
func decodeCursor(c string) (time.Time, string, error) { return core.DecodeTimeCursor(c, ValidID) }

// Update changes fields of one active memory of owner. New content is
// validated, guarded, redacted and embedded like an add (without dedup).
// Expiry is recomputed from now: the request's ttl, else the category's.
func (s *Store) Update(ctx context.Context, req UpdateRequest) (*Memory, error) {
	fe := &core.FieldErrors{}
	fe.Owner(req.Owner)
	fe.ID("id", req.ID)
	src := fe.Source(req.Source)
	if req.Category != nil {
		fe.Category(&s.core.Policy, *req.Category)
		if *req.Category == "" {
			fe.Add("category", "must not be empty")
		}
		if c, ok := s.core.Policy.Category(*req.Category); ok && c.Global {
			fe.Add("category", "%q is global: global memories are added, not made from an owner's memory", c.Name)
		}
	}
	if req.Importance != nil {
		if *req.Importance < 1 || *req.Importance > 10 {
			fe.Add("importance", "%d must be within 1..10", *req.Importance)
		}
	}
	var ttl *time.Duration
	if req.TTL != nil {
		if ttl = fe.TTL(*req.TTL); ttl == nil && fe.Len() == 0 {
			fe.Add("ttl", "must not be empty")
		}
	}
	if req.Content != nil {
		fe.Text("content", *req.Content, core.RawContentLimit(s.core.Policy.Limits.MaxContentBytes))
	}
	if req.Embedding != nil && req.Content == nil {
		fe.Add("embedding", "is the vector of new content: send it with content")
	}
	if req.Embedding != nil {
		fe.Vector("embedding", req.Embedding, s.core.Embedder.Dimensions())
	}
	errs := fe.Len()
	req.Metadata = fe.Metadata("metadata", req.Metadata)
	fe.Tags("tags", req.Tags)
	if fe.Len() == errs && req.Content == nil && req.Category == nil && req.Importance == nil && req.TTL == nil && req.Metadata == nil && req.Tags == nil {
		fe.Add("request", "nothing to update: set content, category, importance, ttl, metadata or tags")
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	var content string
	var flags []string
	var vec, next []float32
	if req.Content != nil {
		c, err := s.w.Clean("content", *req.Content, fe)
		if err != nil {
			return nil, err
		}
		content, flags = c.Text, c.Flags
		if vec, next, err = s.updateVector(ctx, req, content); err != nil {
			return nil, err
		}
	}
	var out Memory
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.lockOwner(ctx, tx, req.Owner); err != nil {
			return err
		}
		var err error
		if next, err = s.holdNext(ctx, tx, next); err != nil {
			return err
		}
		cur, err := (*reader)(s).load(ctx, tx, req.Owner, req.ID, true)
		if err != nil {
			return err
		}
		if !cur.Active {
			return core.Conflictf("memory %s is inactive (deleted, expired, forgotten or superseded); add it again instead", req.ID)
		}
		category := cur.Category
		if req.Category != nil {
			category = *req.Category
		}
		for _, c := range []string{cur.Category, category} {
			if err := core.CheckProtected(&s.core.Policy, c, src); err != nil {
				return err
			}
		}
		out, err = (*reader)(s).applyUpdate(ctx, tx, cur, req, src, category, content, flags, vec, next, ttl)
		return err
	})
	if err != nil {
		return nil, err
	}
	if next != nil {
		s.core.NextDone(1)
	}
	return &out, nil
}

// Delete soft-deletes one memory of owner (purge removes it for good after
// retention.purgeInactiveAfter). Deleting an inactive memory is a no-op.
func (s *Store) Delete(ctx context.Context, owner, id string, source Source) error {
	fe := &core.FieldErrors{}
	fe.Owner(owner)
	fe.ID("id", id)
	src := fe.Source(source)
	if err := fe.Err(); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.lockOwner(ctx, tx, owner); err != nil {
			return err
		}
		cur, err := (*reader)(s).load(ctx, tx, owner, id, true)
		if err != nil {
			return err
		}
		if err := core.CheckProtected(&s.core.Policy, cur.Category, src); err != nil {
			return err
		}
		if !cur.Active {
			return nil
		}
		// cur is locked: its history row is written from it (historyrow.go).
		_, err = tx.Exec(ctx, `WITH upd AS (
				UPDATE `+s.sql.memories+` SET active = false, deactivated_at = now(), updated_at = now()
				WHERE id = $1 RETURNING id)
			INSERT INTO `+s.sql.history+` (memory_id, owner_id, action, actor, actor_id, old_content)
			VALUES ($1, $4, 'delete', $2, $3, $5)`, id, string(src), core.ActorID(ctx), cur.Owner, cur.Content)
		return core.DBErr("deleting memory "+id, err)
	})
}

// maxSupersedeChain bounds the cycle check of Supersede.
const maxSupersedeChain = 1000

// Supersede retires oldID in favour of newID, both of owner, in one
// transaction: no self-reference, no other owner's memory, no cycle, the
// replacement must be active and oldID must not be superseded already
// (ErrConflict: a chain never forks). It returns the retired memory.
func (s *Store) Supersede(ctx context.Context, owner, oldID, newID string, source Source) (*Memory, error) {
	fe := &core.FieldErrors{}
	fe.Owner(owner)
	fe.ID("id", oldID)
	fe.ID("by", newID)
	src := fe.Source(source)
	if oldID != "" && strings.EqualFold(oldID, newID) {
		fe.Add("by", "a memory cannot supersede itself")
	}
	if err := fe.Err(); err != nil {
		return nil, err
	}
	var out Memory
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.lockOwner(ctx, tx, owner); err != nil {
			return err
		}
		old, err := (*reader)(s).load(ctx, tx, owner, oldID, true)
		if err != nil {
			return err
		}
		replacement, err := (*reader)(s).load(ctx, tx, owner, newID, true)
		if err != nil {
			return err
		}
		if err := core.CheckProtected(&s.core.Policy, old.Category, src); err != nil {
			return err
		}
		// A memory is replaced once: a second supersede would fork the
		// chain and lose which replacement is current.
		if old.SupersededBy != "" {
			return core.Conflictf("memory %s is already superseded by %s; supersede %s instead", oldID, old.SupersededBy, old.SupersededBy)
		}
		if !replacement.Active {
			return core.Conflictf("the replacement %s is inactive", newID)
		}
		if err := (*reader)(s).checkNoCycle(ctx, tx, oldID, newID); err != nil {
			return err
		}
		if err := s.w.SupersedeRow(ctx, tx, write.Supersede{OldID: oldID, NewID: newID, Owner: old.Owner, OldContent: old.Content,
			Actor: src, Action: "supersede"}); err != nil {
			return err
		}
		out, err = (*reader)(s).load(ctx, tx, owner, oldID, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// checkNoCycle follows newID's superseded_by chain; reaching oldID would make
// a cycle.
func (s *reader) checkNoCycle(ctx context.Context, tx pgx.Tx, oldID, newID string) error {
	var cycle bool
	err := tx.QueryRow(ctx, `WITH RECURSIVE chain(id, depth) AS (
			SELECT superseded_by, 1 FROM `+s.sql.memories+` WHERE id = $1
			UNION ALL
			SELECT m.superseded_by, c.depth + 1 FROM `+s.sql.memories+` m JOIN chain c ON m.id = c.id
			WHERE c.depth < $3)
		SELECT EXISTS (SELECT 1 FROM chain WHERE id = $2)`, newID, oldID, maxSupersedeChain).Scan(&cycle)
	if err != nil {
		return core.DBErr("checking the supersede chain", err)
	}
	if cycle {
		return core.Conflictf("%s is already (transitively) superseded by %s; superseding it back would make a cycle", newID, oldID)
	}
	return nil
}

// EraseOwner hard-deletes every memory of owner and all their history (the
// GDPR right to erasure) in one transaction, and returns the counts.
func (s *Store) EraseOwner(ctx context.Context, owner string) (*EraseResult, error) {
	fe := &core.FieldErrors{}
	fe.Owner(owner)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	res := &EraseResult{}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.lockOwner(ctx, tx, owner); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM `+s.sql.history+` WHERE owner_id = $1`, owner)
		if err != nil {
			return core.DBErr("erasing history", err)
		}
		res.History = tag.RowsAffected()
		tag, err = tx.Exec(ctx, `DELETE FROM `+s.sql.memories+` WHERE owner_id = $1`, owner)
		if err != nil {
			return core.DBErr("erasing memories", err)
		}
		res.Memories = tag.RowsAffected()
		// After the memories: a concurrent access write has committed by
		// now (it holds key-share locks on them), and this sees its rows.
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.sql.access+` WHERE owner_id = $1`, owner); err != nil {
			return core.DBErr("erasing the owner's access statistics", err)
		}
		erased, err := s.conv.EraseOwner(ctx, tx, owner)
		if err != nil {
			return err
		}
		res.Sessions, res.Messages, res.Summaries = erased.Sessions, erased.Messages, erased.Summaries
		lt, err := s.lt.EraseOwner(ctx, tx, owner)
		if err != nil {
			return err
		}
		res.Episodes, res.Documents, res.Changelog = lt.Episodes, lt.Documents, lt.Changelog
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.sql.compactState+` WHERE owner_id = $1`, owner); err != nil {
			return core.DBErr("erasing the owner's compaction state", err)
		}
		// Nothing of the owner is left, not even its lock row; the lock is
		// held until commit, and a write waiting for it creates it anew.
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.sql.ownerLocks+` WHERE owner_id = $1`, owner); err != nil {
			return core.DBErr("erasing the owner's lock row", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ActiveCount counts owner's active memories.
func (s *Store) ActiveCount(ctx context.Context, owner string) (int64, error) {
	fe := &core.FieldErrors{}
	fe.Owner(owner)
	if err := fe.Err(); err != nil {
		return 0, err
	}
	var n int64
	err := s.core.Pool.QueryRow(ctx, `SELECT count(*) FROM `+s.sql.memories+` WHERE owner_id = $1 AND active`, owner).Scan(&n)
	return n, core.DBErr("counting memories", err)
}
