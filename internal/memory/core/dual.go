package core

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/modelapi"
)

// Dual writes during a re-embed (issue 29; docs/decisions.md, "Dual writes
// during a re-embed"): while the tenant's re-embed fills the shadow columns
// embedding_next toward the service's next embedder, every write of a
// vector also writes the next embedder's vector of its text, computed
// concurrently with the current one. Best effort: when the next embedder
// fails or is slower than its bound, the write goes on with embedding_next
// NULL and the fill Job gives the row its vector later.

// Outcomes of one dual write, counted by Next.Count.
const (
	NextWritten  = "written"   // the next embedder's vectors were written
	NextFailed   = "failed"    // the next embedder failed: embedding_next left NULL
	NextTimedOut = "timeout"   // the next embedder was slower than Next.Timeout
	NextStale    = "stale"     // the re-embed ended or changed before the commit
	nextIdleTTL  = time.Second // how long "not filling toward Next" is cached
	// nextFillTTL is how long "filling toward Next" is cached; every write
	// checks it again in its transaction (NextHeld), so it may be longer.
	nextFillTTL = 10 * time.Second
)

// DefaultNextTimeout bounds one call of the next embedder when
// Next.Timeout is zero.
const DefaultNextTimeout = 2 * time.Second

// Next is the embedder a re-embed of the tenant fills toward, as the
// service knows it from its configuration. Whether the tenant is filling
// toward it is the tenant's reembed row's to say (read, cached briefly):
// the configuration may lag behind an abort or a switch.
type Next struct {
	Provider, Model string
	Dimensions      int
	Embedder        modelapi.Embedder
	// Timeout bounds one call of Embedder; zero is DefaultNextTimeout.
	Timeout time.Duration
	// Count, when set, counts every dual write's outcome (Next* consts).
	Count func(outcome string)

	mu      sync.Mutex
	until   time.Time
	filling bool
}

func (n *Next) count(outcome string) {
	if n.Count != nil {
		n.Count(outcome)
	}
}

// forget drops the cached state: the next write reads it again.
func (n *Next) forget() {
	n.mu.Lock()
	n.until = time.Time{}
	n.mu.Unlock()
}

// nextCheckSQL selects the reembed row when it fills toward $1/$2/$3. FOR
// KEY SHARE holds it until the write's commit: Begin, Switch and Abort
// (which change the shadow columns and this row in one transaction, after
// locking it FOR UPDATE) wait for the write, while the fill's count
// (FOR NO KEY UPDATE) does not.
func (s *State) nextCheckSQL(lock bool) string {
	q := `SELECT true FROM ` + s.Table("reembed") + ` WHERE phase = 'filling'
		AND next_provider = $1 AND next_model = $2 AND next_dimensions = $3`
	if lock {
		q += ` FOR KEY SHARE`
	}
	return q
}

// nextFilling reports, from a cache of nextIdleTTL/nextFillTTL, whether
// the tenant fills toward s.Next.
func (s *State) nextFilling(ctx context.Context) (bool, error) {
	n := s.Next
	n.mu.Lock()
	if time.Now().Before(n.until) {
		f := n.filling
		n.mu.Unlock()
		return f, nil
	}
	n.mu.Unlock()
	var ok bool
	err := s.Pool.QueryRow(ctx, s.nextCheckSQL(false), n.Provider, n.Model, n.Dimensions).Scan(&ok)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, DBErr("reading the re-embed state", err)
	}
	ttl := nextIdleTTL
	if ok {
		ttl = nextFillTTL
	}
	n.mu.Lock()
	n.filling, n.until = ok, time.Now().Add(ttl)
	n.mu.Unlock()
	return ok, nil
}

// NextVectors starts computing the next embedder's vectors of texts, when
// the store has a next embedder and the tenant fills toward it, alongside
// whatever the caller does meanwhile (the current embedder's call); the
// function it returns waits for them (at most Next.Timeout) and returns
// them, or nil when there are none to write (no re-embed toward Next, or
// the next embedder failed or was too slow: counted). It never fails the
// caller's write.
func (s *State) NextVectors(ctx context.Context, texts []string) func() [][]float32 {
	if s.Next == nil || len(texts) == 0 {
		return func() [][]float32 { return nil }
	}
	n := s.Next
	timeout := n.Timeout
	if timeout <= 0 {
		timeout = DefaultNextTimeout
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	done := make(chan [][]float32, 1)
	go func() {
		defer cancel()
		done <- s.nextVectors(cctx, texts)
	}()
	return func() [][]float32 {
		select {
		case v := <-done:
			return v
		case <-ctx.Done():
			cancel()
			return nil
		}
	}
}

func (s *State) nextVectors(ctx context.Context, texts []string) [][]float32 {
	n := s.Next
	filling, err := s.nextFilling(ctx)
	if err != nil {
		s.Log.Warn("dual write: reading the re-embed state", "error", err)
		n.count(NextFailed)
		return nil
	}
	if !filling {
		return nil
	}
	vecs, err := n.Embedder.Embed(ctx, texts)
	if err == nil && len(vecs) != len(texts) {
		err = modelapi.ErrUpstream
	}
	for _, v := range vecs {
		if err == nil && len(v) != n.Dimensions {
			err = modelapi.ErrUpstream
		}
	}
	switch {
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		s.Log.Warn("dual write: the next embedder is too slow; the re-embed fill will embed the rows", "embedder", n.Model, "texts", len(texts))
		n.count(NextTimedOut)
		return nil
	case err != nil:
		s.Log.Warn("dual write: the next embedder failed; the re-embed fill will embed the rows", "embedder", n.Model, "error", err)
		n.count(NextFailed)
		return nil
	}
	return vecs
}

// NextHeld checks, in the write's transaction, that the tenant still fills
// toward s.Next, and holds that until the commit (nextCheckSQL): the
// shadow columns are there and are Next's. false (the re-embed was
// switched or aborted since NextVectors) drops the dual write: count it
// with NextDone.
func (s *State) NextHeld(ctx context.Context, tx Querier) (bool, error) {
	n := s.Next
	var ok bool
	err := tx.QueryRow(ctx, s.nextCheckSQL(true), n.Provider, n.Model, n.Dimensions).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		n.forget()
		n.count(NextStale)
		return false, nil
	}
	if err != nil {
		return false, DBErr("checking the re-embed state", err)
	}
	return true, nil
}

// NextBatch queues NextHeld's check in a pipeline; read its answer with
// NextHeldResult.
func (s *State) NextBatch(b *pgx.Batch) {
	n := s.Next
	b.Queue(s.nextCheckSQL(true), n.Provider, n.Model, n.Dimensions)
}

// NextHeldResult reads the answer of NextBatch's check (NextHeld).
func (s *State) NextHeldResult(br pgx.BatchResults) (bool, error) {
	var ok bool
	err := br.QueryRow().Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		s.Next.forget()
		s.Next.count(NextStale)
		return false, nil
	}
	if err != nil {
		return false, DBErr("checking the re-embed state", err)
	}
	return true, nil
}

// NextDone counts n dual writes committed with their next vectors.
func (s *State) NextDone(n int) {
	for range n {
		s.Next.count(NextWritten)
	}
}
