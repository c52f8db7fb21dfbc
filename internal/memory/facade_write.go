package memory

import (
	"context"

	"github.com/engram-dev/engram/internal/memory/write"
)

// The write path of memories is write.Store (internal/memory/write), over
// the same core state: Add, AddBatch, Extract and session extraction all
// write through it. These names and methods keep the façade's API; each
// method's rules are documented on the write.Store method of the same name.

type (
	Memory     = write.Memory
	AddRequest = write.AddRequest
	Action     = write.Action
	AddResult  = write.AddResult
)

// Actions of AddResult.
const (
	ActionAdded       = write.ActionAdded
	ActionMerged      = write.ActionMerged
	ActionReactivated = write.ActionReactivated
	ActionUpdated     = write.ActionUpdated
	ActionReplaced    = write.ActionReplaced
	ActionNoop        = write.ActionNoop
)

// GlobalOwner is the reserved owner id of tenant-wide memories (write.GlobalOwner).
const GlobalOwner = write.GlobalOwner

// HistoryEvict is the history action of a memory evicted over the
// per-owner cap (write.HistoryEvict).
const HistoryEvict = write.HistoryEvict

// BeginAdd starts an add's transaction (write.BeginAdd; the benchmark's raw side sends it too).
const BeginAdd = write.BeginAdd

// Add stores one memory with two-threshold dedup (write.Store.Add).
func (s *Store) Add(ctx context.Context, req AddRequest) (*AddResult, error) {
	return s.w.Add(ctx, req)
}

// AddBatch validates every item first, then stores them in order (write.Store.AddBatch).
func (s *Store) AddBatch(ctx context.Context, reqs []AddRequest) ([]AddResult, error) {
	return s.w.AddBatch(ctx, reqs)
}

// NearestQuery is the SQL of add's neighbour lookup (write.Store.NearestQuery).
func (s *Store) NearestQuery(dims int) string { return s.w.NearestQuery(dims) }

// InsertQuery is the SQL of add's insert with its history row (write.Store.InsertQuery).
func (s *Store) InsertQuery() string { return s.w.InsertQuery() }
