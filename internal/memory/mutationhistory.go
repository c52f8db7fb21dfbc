package memory

import (
	"context"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
)

// The mutation history of a memory (memory_history): every add, update,
// merge, supersede, delete and eviction, read back page by page. Not the
// message history of a conversation (SearchHistory, conversation/explore.go).

const (
	defaultHistoryPage = 100
	maxHistoryPage     = 1000
)

// History pages through the mutations of one memory of owner, oldest
// first: at most req.Limit rows (0 = 100, at most 1000) and the byte cap
// per page, from req.Cursor. A memory keeps its first row and its newest
// limits.maxHistoryPerMemory (updateAndPrune). A memory evicted over the
// cap is gone, but its eviction row is not (until the purge job's
// retention): its history is that one row, so a client can tell an
// evicted memory from a lost one.
func (s *Store) History(ctx context.Context, req HistoryRequest) (*HistoryPage, error) {
	fe := &core.FieldErrors{}
	fe.Owner(req.Owner)
	fe.ID("id", req.ID)
	limit := fe.Limit(req.Limit, defaultHistoryPage, maxHistoryPage)
	after, err := core.DecodeSerialCursor(req.Cursor)
	fe.Cursor(err)
	if err := fe.Err(); err != nil {
		return nil, err
	}
	page := &HistoryPage{Items: []HistoryEntry{}}
	b := core.NewAnswerBytes((*reader)(s).answerCap(req.MaxBytes), page)
	if _, err := s.Get(ctx, req.Owner, req.ID); errors.Is(err, ErrNotFound) {
		return (*reader)(s).evictionHistory(ctx, req.Owner, req.ID, b, page, err)
	} else if err != nil {
		return nil, err
	}
	scan, err := (*reader)(s).historyRows(ctx, b, limit, `WHERE memory_id = $1 AND id > $2`, req.ID, after)
	if err != nil {
		return nil, err
	}
	page.Items = scan.Items
	page.PageBounds = scan.Bounds(func(h HistoryEntry) string { return core.EncodeSerialCursor(h.ID) })
	return page, nil
}

// evictionHistory is the history of a memory that does not exist: its
// eviction row, if owner's memory id was evicted, else notFound.
func (s *reader) evictionHistory(ctx context.Context, owner, id string, b *core.AnswerBytes, page *HistoryPage, notFound error) (*HistoryPage, error) {
	scan, err := s.historyRows(ctx, b, 1, `WHERE memory_id = $1 AND owner_id = $2 AND action = '`+HistoryEvict+`'`, id, owner)
	if err != nil {
		return nil, err
	}
	if len(scan.Items) == 0 {
		return nil, notFound
	}
	page.Items = scan.Items[:1]
	return page, nil
}

// historyRows reads a page of at most limit history rows matching where,
// oldest first, within b.
func (s *reader) historyRows(ctx context.Context, b *core.AnswerBytes, limit int, where string, args ...any) (core.PageScan[HistoryEntry], error) {
	rows, err := s.core.Pool.Query(ctx, `SELECT id, memory_id::text, action, actor, actor_id, old_content, new_content, details, created_at
		FROM `+s.sql.history+` `+where+` ORDER BY id LIMIT `+strconv.Itoa(limit+1), args...)
	if err != nil {
		return core.PageScan[HistoryEntry]{}, core.DBErr("reading history", err)
	}
	scan, err := core.ScanPage(rows, limit, b, scanHistoryEntry)
	return scan, core.DBErr("reading history", err)
}

func scanHistoryEntry(rows pgx.Rows) (HistoryEntry, error) {
	var h HistoryEntry
	var actor string
	if err := rows.Scan(&h.ID, &h.MemoryID, &h.Action, &actor, &h.ActorID, &h.OldContent, &h.NewContent, &h.Details, &h.At); err != nil {
		return HistoryEntry{}, err
	}
	h.Actor, h.At = Source(actor), h.At.UTC()
	if len(h.Details) == 0 {
		h.Details = nil
	}
	return h, nil
}
