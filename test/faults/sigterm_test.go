package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestSIGTERMUnderLoad: on SIGTERM `manager serve` fails /readyz first,
// keeps serving for --shutdown-delay (the time endpoints need to drop the
// pod), then finishes in-flight requests and exits 0. Clients stop sending
// once readiness fails, as a Service would stop routing to the pod: not one
// of their requests fails.
func TestSIGTERMUnderLoad(t *testing.T) {
	bin := buildManager(t)
	adminURL := testenv.NewInstance(t, "faults").Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	schema, login := provision(t, ctx, adminURL, "engram_sigterm")
	const delay = 2 * time.Second
	svc := startService(t, bin, login, schema, "--shutdown-delay="+delay.String(), "--shutdown-timeout=10s")

	var routed atomic.Bool // the "endpoints": true while the pod is ready
	routed.Store(true)
	var sent, failed, afterUnready atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; i < maxPerWriter && routed.Load(); i++ {
				o := svc.call(ctx, "POST", fmt.Sprintf("/v1/owners/term-%d-%d/memories", w, i/perOwner), map[string]any{"content": randomSentence(), "source": "user"})
				sent.Add(1)
				if o.err != nil || o.status/100 != 2 {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("status %d error %v body %s", o.status, o.err, o.body))
				}
			}
		})
	}
	time.Sleep(time.Second)
	signalled := time.Now()
	if err := svc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Readiness fails first, while the API still answers.
	var unreadyAfter time.Duration
	for time.Since(signalled) < delay {
		resp, err := http.Get(svc.base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable {
				unreadyAfter = time.Since(signalled)
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if unreadyAfter == 0 {
		t.Fatalf("/readyz did not fail within the shutdown delay of %s", delay)
	}
	// Requests sent after readiness failed, before the endpoints "update".
	o := svc.call(ctx, "POST", "/v1/owners/term-late/memories", map[string]any{"content": randomSentence(), "source": "user"})
	if o.status/100 == 2 {
		afterUnready.Add(1)
	} else {
		t.Errorf("a request during the shutdown delay failed: %d %v %s", o.status, o.err, o.body)
	}
	routed.Store(false)
	wg.Wait()

	exited := make(chan error, 1)
	go func() { exited <- svc.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("manager serve exited with %v after SIGTERM, want 0", err)
		}
	case <-time.After(delay + 15*time.Second):
		t.Fatal("manager serve did not exit after SIGTERM")
	}
	took := time.Since(signalled)
	t.Logf("SIGTERM under load: %d requests sent, %d failed; /readyz failed %s after the signal; served during the delay: %d; exited after %s",
		sent.Load(), failed.Load(), unreadyAfter.Round(time.Millisecond), afterUnready.Load(), took.Round(time.Millisecond))
	if failed.Load() != 0 {
		t.Errorf("%d requests failed during the shutdown; first: %v", failed.Load(), firstFailure.Load())
	}
	if took < delay {
		t.Errorf("exited %s after SIGTERM, before the shutdown delay of %s", took, delay)
	}
	if sent.Load() < 20 {
		t.Errorf("only %d requests were sent: the load did not run", sent.Load())
	}
}
