package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"
)

// load is the writers running against a service.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	res    loadResult
}

type loadResult struct {
	acked  map[string]ackedWrite // memory id -> what was written
	failed []outcome
	// plainEvictions sums the `evicted` the adds of plain writers reported.
	plainEvictions int
	slowest        time.Duration
}

type ackedWrite struct {
	writer, owner, content string
	requestID              string
	sent                   time.Time
}

// fullWriter names the writer into the full owner.
const fullWriter = "full"

func startLoad(ctx context.Context, svc *service) *load {
	ctx, cancel := context.WithCancel(ctx)
	l := &load{cancel: cancel, res: loadResult{acked: map[string]ackedWrite{}}}
	for w := range writers {
		name := fmt.Sprintf("writer-%d", w)
		l.wg.Go(func() {
			l.write(ctx, svc, name, func(i int) string { return fmt.Sprintf("%s-%d", name, i/perOwner) }, 5)
		})
	}
	l.wg.Go(func() { l.write(ctx, svc, fullWriter, func(int) string { return fullOwner }, 1) })
	return l
}

// write sends up to maxPerWriter adds until ctx ends, the i-th to owner(i).
func (l *load) write(ctx context.Context, svc *service, writer string, owner func(int) string, importance int) {
	for i := range maxPerWriter {
		if ctx.Err() != nil {
			return
		}
		w := ackedWrite{writer: writer, owner: owner(i), content: randomSentence(), sent: time.Now()}
		o := svc.call(ctx, "POST", "/v1/owners/"+w.owner+"/memories",
			map[string]any{"content": w.content, "category": "contextual", "importance": importance, "source": "user"})
		if ctx.Err() != nil {
			return // stopped mid-call: neither acknowledged nor failed
		}
		w.requestID = o.requestID
		l.record(w, o)
		if o.status/100 != 2 {
			time.Sleep(50 * time.Millisecond) // a client that honours Retry-After, shortened
		}
	}
}

func (l *load) record(w ackedWrite, o outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.res.slowest = max(l.res.slowest, o.took)
	var res struct {
		Memory struct {
			ID string `json:"id"`
		} `json:"memory"`
		Evicted int `json:"evicted"`
	}
	if o.status/100 != 2 || json.Unmarshal(o.body, &res) != nil || res.Memory.ID == "" {
		l.res.failed = append(l.res.failed, o)
		return
	}
	l.res.acked[res.Memory.ID] = w
	if w.writer != fullWriter {
		l.res.plainEvictions += res.Evicted
	}
}

// waitAcked waits until n writes are acknowledged in all.
func (l *load) waitAcked(t *testing.T, n int) {
	t.Helper()
	l.waitFor(t, fmt.Sprintf("%d acknowledged writes", n), func(r *loadResult) bool { return len(r.acked) >= n })
}

// waitRecovered waits until every writer has n acknowledged writes sent
// at or after since.
func (l *load) waitRecovered(t *testing.T, since time.Time, n int) {
	t.Helper()
	l.waitFor(t, fmt.Sprintf("%d acknowledged writes of every writer after the recovery", n), func(r *loadResult) bool {
		per := map[string]int{}
		for _, w := range r.acked {
			if !w.sent.Before(since) {
				per[w.writer]++
			}
		}
		for w := range writers {
			if per[fmt.Sprintf("writer-%d", w)] < n {
				return false
			}
		}
		return per[fullWriter] >= n
	})
}

func (l *load) waitFor(t *testing.T, what string, done func(*loadResult) bool) {
	t.Helper()
	deadline := time.Now().Add(phaseLimit)
	for {
		l.mu.Lock()
		ok, acked, failed := done(&l.res), len(l.res.acked), len(l.res.failed)
		l.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			l.stop()
			t.Fatalf("no %s within %s (%d acknowledged, %d failed in all): the load did not run", what, phaseLimit, acked, failed)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *load) stop() loadResult {
	l.cancel()
	l.wg.Wait()
	return l.res
}
