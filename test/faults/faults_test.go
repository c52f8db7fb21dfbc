// Package faults runs a real `manager serve` against a real PostgreSQL that
// it restarts and kills under write load, and checks that nothing the
// service acknowledged is lost, that every failure is a 503 problem with
// Retry-After, that no call outlives the request timeout, and that the
// service becomes ready again by itself.
//
// The load is sized by counts, never by how much fits in a time window, so
// the suite means the same on a fast machine and a busy one: the fault
// lands once writes are being acknowledged, the load stops once every
// writer has been acknowledged again after the recovery, and no owner of
// the plain writers gets near the per-owner cap. One writer writes into an
// owner that is full on purpose: its writes evict, and the verifier tells
// an evicted write (gone, with an eviction in its history) from a lost one.
//
// The PostgreSQL is testenv's throw-away instance "faults": its server
// default is synchronous_commit=off (the fast settings), so what survives
// a kill is what Engram's own sessions asked to be durable.
package faults

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/testenv"
)

const (
	writers = 4 // plain writers, plus the one that writes into a full owner
	// perOwner is how many writes a plain writer sends to one owner before
	// it moves on to the next: well under the default per-owner cap, so
	// no plain write is ever evicted, however fast the machine.
	perOwner = 250
	// maxPerWriter bounds every writer's calls, whatever the timing.
	maxPerWriter = 20000
	// ackedBeforeFault is how many acknowledged writes the fault waits for.
	ackedBeforeFault = 200
	// ackedAfterRecovery is how many writes each writer must have
	// acknowledged, sent after /readyz is 200 again, before the load stops.
	ackedAfterRecovery = 20
	outage             = 1 * time.Second
	// phaseLimit bounds each wait for the load; reaching it fails the test.
	phaseLimit = 2 * time.Minute
	// fullOwner is the owner filled to the cap before the load.
	fullOwner = "full-owner"
)

// serverFaults are what the suite does to its PostgreSQL under load: the
// subtest's name and the action of testenv.Instance.Fault.
var serverFaults = []struct{ name, action string }{
	{"clean restart", "stop"},
	{"kill -9 of the postmaster", "kill"},
}

func TestNoAcknowledgedWriteIsLost(t *testing.T) {
	bin := buildManager(t)
	in := testenv.NewInstance(t, "faults")
	adminURL := in.Start(t)
	capacity := memory.DefaultPolicy().Limits.MaxMemoriesPerOwner
	if perOwner >= capacity {
		t.Fatalf("perOwner %d must stay under the per-owner cap %d", perOwner, capacity)
	}
	for _, fault := range serverFaults {
		t.Run(fault.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			schema, login := provision(t, ctx, adminURL, "engram_faults")
			svc := startService(t, bin, login, schema)
			fillOwner(ctx, t, svc, fullOwner, capacity)

			load := startLoad(ctx, svc)
			load.waitAcked(t, ackedBeforeFault)
			in.Fault(t, fault.action)
			time.Sleep(outage)
			in.Start(t)
			ready := svc.waitReady(t, 60*time.Second)
			load.waitRecovered(t, time.Now(), ackedAfterRecovery)
			res := load.stop()

			v := res.verify(ctx, t, svc)
			t.Logf("%s: acknowledged %d (%d into the full owner), lost %d, evicted %d (each with its eviction in history), failed %d (all 503 problem+json with Retry-After: %v), slowest call %s, ready again %s after the restart",
				fault.name, len(res.acked), v.fullAcked, v.lost, v.evicted, len(res.failed), res.failuresOK(), res.slowest.Round(time.Millisecond), ready.Round(time.Millisecond))
			if v.lost != 0 {
				t.Errorf("%d acknowledged writes are gone after %s, without an eviction record", v.lost, fault.name)
			}
			if v.evictedPlain != 0 || res.plainEvictions != 0 {
				t.Errorf("writes to owners under the cap were evicted (%d gone with a record, %d reported by adds): the load reached the cap", v.evictedPlain, res.plainEvictions)
			}
			if v.evicted == 0 {
				t.Errorf("none of the %d acknowledged writes into the full owner was evicted: the verifier's eviction path was not exercised", v.fullAcked)
			}
			res.reportFailures(t, svc)
			if res.slowest > requestTimeout+2*time.Second {
				t.Errorf("a call took %s, over the request timeout %s", res.slowest, requestTimeout)
			}
		})
	}
}

// fillOwner fills owner to the cap with important memories, through the
// batch API, so that every later write of lower importance evicts the
// owner's oldest such write.
func fillOwner(ctx context.Context, t *testing.T, svc *service, owner string, n int) {
	t.Helper()
	for done := 0; done < n; {
		var items []map[string]any
		for range min(100, n-done) {
			items = append(items, map[string]any{"content": randomSentence(), "category": "contextual", "importance": 10, "source": "user"})
		}
		o := svc.call(ctx, "POST", "/v1/owners/"+owner+"/memories/batch", map[string]any{"items": items})
		if o.status != http.StatusOK {
			t.Fatalf("filling %s: status %d error %v body %s", owner, o.status, o.err, o.body)
		}
		done += len(items)
	}
}

// reportFailures fails the test for every failed call that is not a 503
// problem with Retry-After, quoting the service's log lines of the request.
func (r loadResult) reportFailures(t *testing.T, svc *service) {
	t.Helper()
	bad := 0
	for _, f := range r.failed {
		if f.err == nil && f.status == http.StatusServiceUnavailable && strings.HasSuffix(f.problem, "/unavailable") && f.retryAfter != "" {
			continue
		}
		bad++
		if bad <= 5 {
			t.Errorf("a failure during the outage is not a 503 problem with Retry-After: status %d problem %q Retry-After %q error %v body %s\nservice log of request %s:\n%s",
				f.status, f.problem, f.retryAfter, f.err, f.body, f.requestID, svc.logs.linesOf(f.requestID))
		}
	}
	if bad > 5 {
		t.Errorf("... %d such failures in all", bad)
	}
}

func (r loadResult) failuresOK() bool {
	for _, f := range r.failed {
		if f.err != nil || f.status != http.StatusServiceUnavailable || f.retryAfter == "" {
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
