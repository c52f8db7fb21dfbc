package main

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/memory"
)

// moveLoad is the move part's writers and reader on the source, through
// the memory engine as the service runs it (the login role's pool).
type moveLoad struct {
	pool   *pgxpool.Pool
	store  *memory.Store
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu         sync.Mutex
	ackedIDs   []string
	firstError string
	// freeze window, as nanoseconds since the epoch (0: not yet).
	freezeStart, freezeEnd atomic.Int64

	writesAcked, writesRefused, refusedInFreeze, writesFailed atomic.Int64
	reads, readsRefused, readsFailed                          atomic.Int64
}

// startMoveLoad starts the writers and the reader on the source tenant.
func (h *movePart) startMoveLoad(ctx context.Context, loginURL string, owners int) (*moveLoad, error) {
	// The service's own session settings: the engine's bounds.
	pool, err := memory.NewPool(ctx, loginURL, moveWriters+moveReaders+1,
		memory.SessionSettings{LockTimeout: memory.DefaultLockTimeout, StatementTimeout: memory.DefaultStatementTimeout})
	if err != nil {
		return nil, err
	}
	emb, err := memory.NewBuiltinEmbedder(benchDims)
	if err != nil {
		pool.Close()
		return nil, err
	}
	store, err := memory.New(memory.Config{Pool: pool, Schema: benchSchema, Policy: benchPolicy(), Embedder: emb})
	if err != nil {
		pool.Close()
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, moveBound)
	ld := &moveLoad{pool: pool, store: store, cancel: cancel}
	for w := range moveWriters {
		rng := rand.New(rand.NewPCG(4242, uint64(w)))
		ld.wg.Add(1)
		go func() {
			defer ld.wg.Done()
			ld.loop(lctx, moveWritePause, func(ctx context.Context) error { return ld.write(ctx, h, rng, owners) }, ld.writeOutcome)
		}()
	}
	rng := rand.New(rand.NewPCG(4343, 0))
	ld.wg.Add(1)
	go func() {
		defer ld.wg.Done()
		ld.loop(lctx, moveReadPause, func(ctx context.Context) error {
			owner := jobOwnerName(rng.IntN(owners))
			_, err := store.Search(ctx, memory.SearchRequest{Owner: owner, Query: h.corpus.query(rng, owner, rng.IntN(seedPerOwner)),
				Mode: memory.SearchVector, TopK: topK})
			return err
		}, ld.readOutcome)
	}()
	return ld, nil
}

// loop runs op until ctx ends or moveMaxOps ran, pausing between calls.
func (ld *moveLoad) loop(ctx context.Context, pause time.Duration, op func(context.Context) error, outcome func(time.Time, error)) {
	for range moveMaxOps {
		if ctx.Err() != nil {
			return
		}
		t0 := time.Now()
		err := op(ctx)
		if ctx.Err() != nil {
			return // stopped mid-call: neither acknowledged nor refused
		}
		outcome(t0, err)
		if pause > 0 && memory.Sleep(ctx, pause) != nil {
			return
		}
	}
}

func (ld *moveLoad) write(ctx context.Context, h *movePart, rng *rand.Rand, owners int) error {
	it := h.corpus.fresh(rng)
	res, err := ld.store.Add(ctx, memory.AddRequest{Owner: jobOwnerName(rng.IntN(owners)), Content: it.Content,
		Category: it.Category, Importance: it.Importance})
	if err == nil {
		ld.mu.Lock()
		ld.ackedIDs = append(ld.ackedIDs, res.Memory.ID)
		ld.mu.Unlock()
	}
	return err
}

func (ld *moveLoad) writeOutcome(t0 time.Time, err error) {
	switch {
	case err == nil:
		ld.writesAcked.Add(1)
	case memory.IsUnavailable(err):
		ld.writesRefused.Add(1)
		if ld.inFreeze(t0) {
			ld.refusedInFreeze.Add(1)
		}
	default:
		ld.writesFailed.Add(1)
		ld.noteError("write", err)
	}
}

func (ld *moveLoad) readOutcome(_ time.Time, err error) {
	ld.reads.Add(1)
	switch {
	case err == nil:
	case memory.IsUnavailable(err):
		ld.readsRefused.Add(1)
	default:
		ld.readsFailed.Add(1)
		ld.noteError("read", err)
	}
}

func (ld *moveLoad) noteError(what string, err error) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if ld.firstError == "" {
		ld.firstError = what + ": " + err.Error()
	}
}

// inFreeze says whether a call that started at t0 overlapped the freeze
// window (or started after it began, when it has not ended yet).
func (ld *moveLoad) inFreeze(t0 time.Time) bool {
	s, e := ld.freezeStart.Load(), ld.freezeEnd.Load()
	return s != 0 && t0.UnixNano() >= s-int64(time.Second) && (e == 0 || t0.UnixNano() <= e)
}

func (ld *moveLoad) freezeFrom(t time.Time)  { ld.freezeStart.Store(t.UnixNano()) }
func (ld *moveLoad) freezeUntil(t time.Time) { ld.freezeEnd.Store(t.UnixNano()) }

// stop ends the load and closes its pool (once; later calls do nothing).
func (ld *moveLoad) stop() {
	ld.once.Do(func() {
		ld.cancel()
		ld.wg.Wait()
		ld.store.Close()
		ld.pool.Close()
	})
}

// acked are the ids of the acknowledged writes.
func (ld *moveLoad) acked() []string {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return append([]string(nil), ld.ackedIDs...)
}

func (ld *moveLoad) report(rep *MoveReport) {
	rep.WritesAcked, rep.WritesRefused, rep.WritesRefusedInFreeze, rep.WritesFailed =
		ld.writesAcked.Load(), ld.writesRefused.Load(), ld.refusedInFreeze.Load(), ld.writesFailed.Load()
	rep.Reads, rep.ReadsRefused, rep.ReadsFailed = ld.reads.Load(), ld.readsRefused.Load(), ld.readsFailed.Load()
	ld.mu.Lock()
	rep.FirstError = ld.firstError
	ld.mu.Unlock()
}
