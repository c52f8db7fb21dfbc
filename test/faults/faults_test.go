// Package faults runs a real `manager serve` against a real PostgreSQL that
// it restarts and kills under write load, and checks that nothing the
// service acknowledged is lost, that every failure is a 503 problem with
// Retry-After, that no call outlives the request timeout, and that the
// service becomes ready again by itself.
package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

const (
	writers       = 4
	maxPerWriter  = 3000 // bounds the load whatever the timing
	beforeFault   = 2 * time.Second
	outage        = 1 * time.Second
	afterRecovery = 3 * time.Second
)

func TestNoAcknowledgedWriteIsLost(t *testing.T) {
	bin := buildManager(t)
	in := newInstance(t, "faults")
	adminURL := in.run(t, "start")
	for _, fault := range []struct{ name, action string }{
		{"clean restart", "stop"},
		{"kill -9 of the postmaster", "kill"},
	} {
		t.Run(fault.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			schema := fmt.Sprintf("engram_faults_%d", time.Now().UnixNano()%1e9)
			svc := startService(t, bin, provision(t, ctx, adminURL, schema), schema)
			t.Cleanup(func() { dropTenant(t, adminURL, schema) })

			load := startLoad(ctx, svc)
			time.Sleep(beforeFault)
			in.run(t, fault.action)
			time.Sleep(outage)
			in.run(t, "start")
			ready := svc.waitReady(t, 60*time.Second)
			time.Sleep(afterRecovery)
			res := load.stop()

			lost := res.verify(ctx, t, svc)
			t.Logf("%s: acknowledged %d, lost %d, failed %d (all 503 problem+json with Retry-After: %v), slowest call %s, ready again %s after the restart",
				fault.name, len(res.acked), lost, len(res.failed), res.failuresOK(), res.slowest.Round(time.Millisecond), ready.Round(time.Millisecond))
			if len(res.acked) < 100 {
				t.Errorf("only %d writes were acknowledged: the load did not run", len(res.acked))
			}
			if lost != 0 {
				t.Errorf("%d acknowledged writes are gone after %s", lost, fault.name)
			}
			for _, f := range res.failed {
				if f.err != nil || f.status != http.StatusServiceUnavailable || !strings.HasSuffix(f.problem, "/unavailable") || f.retryAfter == "" {
					t.Errorf("a failure during the outage is not a 503 problem with Retry-After: status %d problem %q Retry-After %q error %v body %s",
						f.status, f.problem, f.retryAfter, f.err, f.body)
					break
				}
			}
			if res.slowest > requestTimeout+2*time.Second {
				t.Errorf("a call took %s, over the request timeout %s", res.slowest, requestTimeout)
			}
		})
	}
}

// load is the writers running against a service.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	res    loadResult
}

type loadResult struct {
	acked   map[string]ackedWrite // memory id -> what was written
	failed  []outcome
	slowest time.Duration
}

type ackedWrite struct{ owner, content string }

func startLoad(ctx context.Context, svc *service) *load {
	ctx, cancel := context.WithCancel(ctx)
	l := &load{cancel: cancel, res: loadResult{acked: map[string]ackedWrite{}}}
	for w := range writers {
		l.wg.Go(func() { l.write(ctx, svc, fmt.Sprintf("writer-%d", w)) })
	}
	return l
}

func (l *load) write(ctx context.Context, svc *service, owner string) {
	for range maxPerWriter {
		if ctx.Err() != nil {
			return
		}
		content := randomSentence()
		o := svc.call(ctx, "POST", "/v1/owners/"+owner+"/memories", map[string]any{"content": content, "category": "contextual", "source": "user"})
		if ctx.Err() != nil {
			return // stopped mid-call: neither acknowledged nor failed
		}
		l.mu.Lock()
		l.res.slowest = max(l.res.slowest, o.took)
		if o.status/100 == 2 {
			var res struct {
				Action string `json:"action"`
				Memory struct {
					ID string `json:"id"`
				} `json:"memory"`
			}
			if err := json.Unmarshal(o.body, &res); err == nil && res.Memory.ID != "" {
				l.res.acked[res.Memory.ID] = ackedWrite{owner: owner, content: content}
			} else {
				l.res.failed = append(l.res.failed, o)
			}
		} else {
			l.res.failed = append(l.res.failed, o)
		}
		l.mu.Unlock()
		if o.status != 0 && o.status/100 != 2 {
			time.Sleep(50 * time.Millisecond) // a client that honours Retry-After, shortened
		}
	}
}

func (l *load) stop() loadResult {
	l.cancel()
	l.wg.Wait()
	return l.res
}

// verify reads every acknowledged memory back and returns how many are
// missing or changed.
func (r loadResult) verify(ctx context.Context, t *testing.T, svc *service) int {
	t.Helper()
	lost := 0
	for id, w := range r.acked {
		o := svc.call(ctx, "GET", "/v1/owners/"+w.owner+"/memories/"+id, nil)
		var m struct {
			Content string `json:"content"`
		}
		if o.status != http.StatusOK || json.Unmarshal(o.body, &m) != nil || m.Content != w.content {
			lost++
			if lost <= 3 {
				t.Logf("acknowledged memory %s of %s: status %d body %s", id, w.owner, o.status, o.body)
			}
		}
	}
	return lost
}

func (r loadResult) failuresOK() bool {
	for _, f := range r.failed {
		if f.status != http.StatusServiceUnavailable || f.retryAfter == "" {
			return false
		}
	}
	return true
}

// randomSentence is eight random words: far apart for the embedder, so
// every write is a new memory (no dedup merge), and nothing a redactor
// would touch.
func randomSentence() string {
	words := make([]string, 8)
	for i := range words {
		b := make([]byte, 7)
		for j := range b {
			b[j] = byte('a' + rand.IntN(26))
		}
		words[i] = string(b)
	}
	return strings.Join(words, " ")
}

func dropTenant(t *testing.T, adminURL, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := testenv.NewPool(t, adminURL, 1)
	if _, err := tenant.Drop(ctx, admin, schema, tenant.Owner{UID: "faults-" + schema, Namespace: "faults", Name: schema}); err != nil {
		t.Logf("dropping %s: %v", schema, err)
	}
}
