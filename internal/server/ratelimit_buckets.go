package server

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimit is a token bucket: it refills at PerMinute tokens a minute up
// to Burst, and each request takes one token. PerMinute 0 turns it off.
type RateLimit struct {
	PerMinute int
	Burst     int
}

func (l RateLimit) enabled() bool { return l.PerMinute > 0 }

// maxBuckets bounds the buckets one limit keeps (one per credential seen
// recently), so a flood of distinct credentials (minted tokens, say) cannot
// grow the service's memory without bound: about 200 bytes each.
const maxBuckets = 10_000

// sweepEvery is how often, at most, full buckets are dropped when a new
// credential arrives. A full bucket is the same as a new one, so dropping
// it forgets nothing.
const sweepEvery = time.Minute

// buckets is one limit's token buckets, one per credential key. A nil
// *buckets admits everything (the limit is off).
type buckets struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu    sync.Mutex
	m     map[string]*bucket
	swept time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newBuckets(l RateLimit, now func() time.Time) *buckets {
	if !l.enabled() {
		return nil
	}
	return &buckets{limit: rate.Limit(float64(l.PerMinute) / 60), burst: l.Burst, now: now, m: map[string]*bucket{}}
}

// take takes one token from key's bucket. When the bucket is empty it
// takes nothing and returns false with the time until a token is back.
func (b *buckets) take(key string) (bool, time.Duration) {
	if b == nil {
		return true, 0
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	bk := b.bucketOf(key, now)
	if bk.lim.AllowN(now, 1) {
		return true, 0
	}
	missing := 1 - bk.lim.TokensAt(now)
	return false, time.Duration(missing / float64(b.limit) * float64(time.Second))
}

// charge takes one token from key's bucket even when it is empty: the
// bucket goes into debt, which later takes wait for (the further model
// calls of an admitted request, llmCharge). The debt stops at one burst:
// one long request must not lock its credential out for hours (a refill
// of a burst is the longest wait a charge adds).
func (b *buckets) charge(key string) {
	if b == nil {
		return
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	lim := b.bucketOf(key, now).lim
	if lim.TokensAt(now) <= -float64(b.burst) {
		return
	}
	lim.ReserveN(now, 1) // never cancelled: the debt stays
}

// bucketOf returns key's bucket, made full if it is new, marked seen at
// now. b.mu is held.
func (b *buckets) bucketOf(key string, now time.Time) *bucket {
	bk := b.m[key]
	if bk == nil {
		b.makeRoom(now)
		bk = &bucket{lim: rate.NewLimiter(b.limit, b.burst)}
		b.m[key] = bk
	}
	bk.seen = now
	return bk
}

// makeRoom runs before a bucket is added: at most once per sweepEvery, and
// whenever the table is full, it drops the full buckets (idle long enough
// to refill: nothing is forgotten). If the table is still full, the bucket
// seen least recently goes: its credential starts again from a full bucket,
// which is the price of the memory bound (it takes maxBuckets credentials
// active at once, each of which costs its issuer a request to mint).
func (b *buckets) makeRoom(now time.Time) {
	if len(b.m) < maxBuckets && now.Sub(b.swept) < sweepEvery {
		return
	}
	b.swept = now
	for k, bk := range b.m {
		if bk.lim.TokensAt(now) >= float64(b.burst) {
			delete(b.m, k)
		}
	}
	if len(b.m) < maxBuckets {
		return
	}
	oldest, at := "", now
	for k, bk := range b.m {
		if !bk.seen.After(at) {
			oldest, at = k, bk.seen
		}
	}
	delete(b.m, oldest)
}

// size is the number of buckets kept (tests).
func (b *buckets) size() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m)
}
