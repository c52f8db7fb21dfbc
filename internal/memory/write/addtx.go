package write

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory/core"
)

// rollbackTimeout bounds the ROLLBACK of a failed add.
const rollbackTimeout = 5 * time.Second

// addInTx runs the writes of one owner (StoreGroup) in one transaction of
// few round trips: BEGIN, the owner's lock and the first write's neighbour
// lookup go in one pipeline; the last write, when it is an insert (the
// common case), goes with the COMMIT. A single fresh add is then two round
// trips where BEGIN, lock, lookup, insert and COMMIT took five. The
// statements run one after another on the server as before: the lookup
// starts, and takes its snapshot, only after the lock is held, so exact
// dedup is kept; the commit is still acknowledged only once it is durable.
func (s *Store) addInTx(ctx context.Context, owner string, ps []*Prepared, plans []*Plan) ([]AddResult, error) {
	return s.WriteInTx(ctx, owner, ps, plans, Hooks{})
}

// Hooks let a caller of the write path run its own statements inside the
// owner's transaction: session extraction checks and moves its watermark
// there, so the facts and the watermark commit together or not at all.
// Every write of memories, from an add or an extraction, goes through
// WriteInTx; there is no second transaction path to keep in step.
type Hooks struct {
	// Before runs once the owner's lock is held; skip true drops the
	// writes (WriteInTx returns no results and commits nothing else).
	Before func(ctx context.Context, tx core.DBTX) (skip bool, err error)
	// After runs after the writes, before the COMMIT.
	After func(ctx context.Context, tx core.DBTX) error
}

// WriteInTx is addInTx with hooks; ps may be empty (an extraction that
// found no fact still moves its watermark).
func (s *Store) WriteInTx(ctx context.Context, owner string, ps []*Prepared, plans []*Plan, h Hooks) ([]AddResult, error) {
	conn, err := s.core.Pool.Acquire(ctx)
	if err != nil {
		return nil, core.DBErr("begin", err)
	}
	defer conn.Release()
	committed := false
	defer func() {
		if !committed {
			// Also after the caller's context ended, but bounded. A failed
			// rollback leaves the connection in a transaction; the pool
			// closes such connections on release.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			_, _ = conn.Exec(rctx, "ROLLBACK")
		}
	}()
	var first *Prepared
	if len(ps) > 0 {
		first = ps[0]
	}
	dual := len(ps) > 0 && slices.ContainsFunc(ps, func(p *Prepared) bool { return p.NextVec != nil })
	nb, held, err := s.beginLockedLookup(ctx, conn, owner, first, dual)
	if err != nil {
		return nil, err
	}
	if dual && !held {
		for _, p := range ps {
			p.NextVec = nil // the re-embed ended since: write the old vectors only
		}
	}
	if h.Before != nil {
		skip, err := h.Before(ctx, conn)
		if err != nil {
			return nil, err
		}
		if skip {
			ps = nil
		}
	}
	results := make([]AddResult, 0, len(ps))
	for i, p := range ps {
		if i > 0 {
			if nb, err = s.Nearest(ctx, conn, p.Req.Owner, p.Content, p.Vec, false); err != nil {
				return nil, err
			}
		}
		var commit *bool
		if i == len(ps)-1 && h.After == nil {
			commit = &committed
		}
		r, err := s.decide(ctx, conn, p, plans[i], nb, commit)
		if err != nil {
			return nil, err
		}
		results = append(results, *r)
	}
	if h.After != nil {
		if err := h.After(ctx, conn); err != nil {
			return nil, err
		}
	}
	if !committed {
		if err := commitTx(ctx, conn); err != nil {
			return nil, core.DBErr("commit", err)
		}
		committed = true
	}
	if dual && held {
		s.core.NextDone(len(ps))
	}
	return results, nil
}

// BeginAdd starts an add's transaction (the benchmark's raw side sends it too).
const BeginAdd = "BEGIN ISOLATION LEVEL READ COMMITTED"

// beginLockedLookup sends BEGIN, the owner's lock and p's Neighbour lookup
// in one pipeline and returns the Neighbour (none when p is nil: no lookup).
// With dual it also checks, and holds until the commit, that the tenant
// still re-embeds toward the store's next embedder (core.State.NextHeld),
// and returns whether it does.
func (s *Store) beginLockedLookup(ctx context.Context, tx core.DBTX, owner string, p *Prepared, dual bool) (*Neighbour, bool, error) {
	b := &pgx.Batch{}
	// READ COMMITTED explicitly: the lookup must take its snapshot after
	// the lock is granted (each statement its own snapshot), whatever
	// default_transaction_isolation a DBA set on the database or role.
	b.Queue(BeginAdd)
	b.Queue(s.core.LockOwnerQuery(), owner)
	if dual {
		s.core.NextBatch(b)
	}
	if p != nil {
		b.Queue(s.nearestQuery(len(p.Vec), false), p.Req.Owner, pgv.NewVector(p.Vec), p.Content)
	}
	br := tx.SendBatch(ctx, b)
	defer func() { _ = br.Close() }()
	if _, err := br.Exec(); err != nil {
		return nil, false, core.DBErr("begin", err)
	}
	if _, err := br.Exec(); err != nil {
		return nil, false, core.DBErr("locking owner", err)
	}
	held := false
	if dual {
		var err error
		if held, err = s.core.NextHeldResult(br); err != nil {
			return nil, false, err
		}
	}
	if p == nil {
		return nil, held, core.DBErr("locking owner", br.Close())
	}
	nb, err := scanNeighbour(br.QueryRow())
	if err != nil {
		return nil, false, core.DBErr("finding the nearest memory", err)
	}
	if err := br.Close(); err != nil {
		return nil, false, core.DBErr("finding the nearest memory", err)
	}
	return nb, held, nil
}

// commitTx commits and reports a transaction the server rolled back.
func commitTx(ctx context.Context, tx core.DBTX) error {
	tag, err := tx.Exec(ctx, "COMMIT")
	return commitResult(tag.String(), err)
}

func commitResult(tag string, err error) error {
	if err != nil {
		return err
	}
	if tag != "COMMIT" {
		return fmt.Errorf("the transaction was rolled back (%s)", tag)
	}
	return nil
}
