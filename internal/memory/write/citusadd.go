package write

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
)

// On Citus, a plain add through the coordinator was seven round trips from
// the coordinator to the tenant's worker (BEGIN, the owner's lock, the
// lookup, the insert's three parts, COMMIT) and ran at 0.36-0.49 of plain
// PostgreSQL's throughput (issue 30). Migration 15 gives a Citus tenant the
// function add_memory, which Citus delegates whole to the worker holding
// the schema: the lock, the lookup and the insert run there in one call.
// Migration 21 writes its lookup (tenants with the covering index) as
// single-table statements, which Citus plans on its fast path and keeps
// the local plans of; migration 15's CTE was planned again on every call.
//
// add_memory repeats, in PL/pgSQL, what addInTx does for one write whose
// Neighbour is not close enough to decide on: LockOwnerQuery, the lookup of
// nearestQuery (kept rows: keptSinceSQL(purgeGuard)), InsertQuery with its
// history row and the owner's row count. A change to one of those is made
// to the migration's function too (in a new migration); the memory suite
// runs on Citus (ENGRAM_TEST_ON_CITUS) and tests every add through it.
// When the Neighbour is identical or at least dedup.arbitrationThreshold
// similar, the function writes nothing and returns no row, and the add runs
// addInTx as on plain PostgreSQL: merges, arbitration and no-ops have one
// implementation. Plain PostgreSQL has no add_memory and never calls it.

// workerAddProbe remembers whether the schema has add_memory; probed once
// per Store, again after a failed probe.
type workerAddProbe struct {
	state atomic.Int32 // 0 not known, 1 present, 2 absent
	probe sync.Mutex   // one probe at a time; lockTimeout is written before state
	ids   historyIDs
	// lockTimeout is the service's sessions' lock_timeout, which
	// add_memory sets on the worker (whose session has the role's).
	lockTimeout string
}

const (
	workerAddPresent = 1
	workerAddAbsent  = 2
)

// hasWorkerAdd reports whether the tenant's schema has add_memory.
func (s *Store) hasWorkerAdd(ctx context.Context) (bool, error) {
	switch s.workerAdd.state.Load() {
	case workerAddPresent:
		return true, nil
	case workerAddAbsent:
		return false, nil
	}
	s.workerAdd.probe.Lock()
	defer s.workerAdd.probe.Unlock()
	if st := s.workerAdd.state.Load(); st != 0 {
		return st == workerAddPresent, nil
	}
	var present bool
	if err := s.core.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_proc
		WHERE pronamespace = to_regnamespace($1) AND proname = 'add_memory'), current_setting('lock_timeout')`,
		pgx.Identifier{s.core.Schema}.Sanitize()).Scan(&present, &s.workerAdd.lockTimeout); err != nil {
		return false, core.DBErr("looking for add_memory", err)
	}
	state := int32(workerAddAbsent)
	if present {
		state = workerAddPresent
	}
	s.workerAdd.state.Store(state)
	return present, nil
}

// addOnWorker stores one write with add_memory when the schema has it:
// its result, or nil (and no error) when the add must run addInTx — a
// batch of several writes (one transaction for the owner's run), no
// add_memory (plain PostgreSQL), or a Neighbour to decide on.
func (s *Store) addOnWorker(ctx context.Context, ps []*Prepared, plans []*Plan) ([]AddResult, error) {
	// add_memory (migration 15) predates metadata and tags: a write with
	// either runs addInTx.
	if len(ps) != 1 || plans[0] != nil || len(ps[0].Req.Metadata) > 0 || ps[0].Req.Tags != nil {
		return nil, nil
	}
	// It predates the stored text vectors of migration 19 too: under a
	// configuration other than English every add runs addInTx.
	if textConfig, err := s.core.WriteTextConfig(ctx, s.core.Pool); err != nil || textConfig != "" {
		return nil, err
	}
	if ok, err := s.hasWorkerAdd(ctx); err != nil || !ok {
		return nil, err
	}
	historyID, err := s.workerAdd.ids.take(ctx, s)
	if err != nil {
		return nil, err
	}
	p := ps[0]
	res := AddResult{Redactions: p.redactions}
	m, err := scanMemory(s.core.Pool.QueryRow(ctx, s.workerAddQuery(), s.workerAddArgs(ctx, p, historyID)...), false, &res.ownerRows, &res.Similarity)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, core.DBErr("locking owner, finding the nearest memory and inserting memory", err)
	}
	res.Action, res.Memory = ActionAdded, m
	return []AddResult{res}, nil
}

// workerAddQuery calls add_memory in the one form Citus delegates to a
// worker: SELECT ... FROM f(...) with plain parameters, outside a
// transaction block.
func (s *Store) workerAddQuery() string {
	return `SELECT * FROM ` + pgx.Identifier{s.core.Schema, "add_memory"}.Sanitize() +
		`($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`
}

// workerAddArgs are InsertQuery's parameters (the history's details
// without the similarity, which the function adds), the arbitration
// threshold and the seconds keptSinceSQL subtracts from now().
func (s *Store) workerAddArgs(ctx context.Context, p *Prepared, historyID int64) []any {
	details := map[string]any{}
	if len(p.redactions) > 0 {
		details["redactions"] = p.redactions
	}
	kept := time.Duration(s.core.Policy.Retention.PurgeInactiveAfter) - s.PurgeGuard()
	return []any{core.NewID(), p.Req.Owner, p.Req.Agent, p.Req.Session, string(p.Req.Source),
		p.Req.Category, p.Content, p.Req.Importance, pgv.NewVector(p.Vec), FlagsOrEmpty(p.Flags),
		s.ExpirySeconds(p.Req.Category, p.ttl), details, core.ActorID(ctx), p.Req.SourceSession,
		s.core.Policy.Dedup.ArbitrationThreshold, kept.Seconds(), historyID, s.workerAdd.lockTimeout}
}

// History ids for add_memory, drawn from the coordinator's sequence of
// memory_history.id, as every other history row's is (migration 15 says
// why not on the worker). Drawing one per add would cost the round trip
// the function saves; a block of historyIDBlock is drawn at a time and
// used for at most historyIDMaxAge, so an add's history id is never older
// than that: within a memory the order holds (its add row is its first,
// every later row is drawn after it), and across memories the ids of the
// history API follow time as closely as that age.
const (
	historyIDBlock  = 16
	historyIDMaxAge = 250 * time.Millisecond
)

type historyIDs struct {
	mu      sync.Mutex
	ids     []int64
	drawnAt time.Time
}

// take returns the next reserved history id, drawing a new block when the
// reserve is empty or too old.
func (h *historyIDs) take(ctx context.Context, s *Store) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ids) == 0 || time.Since(h.drawnAt) > historyIDMaxAge {
		rows, err := s.core.Pool.Query(ctx, `SELECT nextval(pg_get_serial_sequence($1, 'id')) FROM generate_series(1, $2)`,
			s.sql.history, historyIDBlock)
		if err != nil {
			return 0, core.DBErr("drawing history ids", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return 0, core.DBErr("drawing history ids", err)
		}
		h.ids, h.drawnAt = ids, time.Now()
	}
	id := h.ids[0]
	h.ids = h.ids[1:]
	return id, nil
}
