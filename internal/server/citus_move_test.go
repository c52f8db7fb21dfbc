package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// newCitusTenant provisions a tenant on a fresh database of the Citus
// cluster of CITUS_URL (its schema a distributed schema on one worker).
func newCitusTenant(t *testing.T) (*testTenant, *tenant.Result) {
	t.Helper()
	return provisionTenant(t, testenv.NewCitusDatabase(t), "engram_move")
}

// loadClient sends the load's requests; unlike testServer.do it is safe in
// goroutines and reports failures instead of failing the test.
type loadClient struct {
	srv    *testServer
	client *http.Client
}

// call sends one JSON request and returns the status (0 for a transport
// error) and the body.
func (c loadClient) call(method, path string, body any) (int, []byte) {
	status, raw, _ := c.callWithHeader(method, path, body)
	return status, raw
}

// callWithHeader is call that also returns the answer's headers.
func (c loadClient) callWithHeader(method, path string, body any) (int, []byte, http.Header) {
	js, _ := json.Marshal(body)
	hr, err := http.NewRequest(method, c.srv.base+path, bytes.NewReader(js))
	if err != nil {
		return 0, []byte(err.Error()), nil
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+c.srv.token)
	resp, err := c.client.Do(hr)
	if err != nil {
		return 0, []byte(err.Error()), nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw, resp.Header
}

// ackedWrite is one add the service answered 201.
type ackedWrite struct {
	owner, id, content string
	at                 time.Time     // when the answer came
	took               time.Duration // how long the add took
}

// refusedAdd is one add the service answered 503 with Retry-After: the
// documented answer of a write that waited for a lock longer than the
// lock timeout (the move's final switch on a slow moment), which a client
// retries. It must have written nothing.
type refusedAdd struct {
	owner, content string
	at             time.Time     // when the answer came
	took           time.Duration // how long the add took
}

// lockWait reports whether a refusal is a lock wait of the move's final
// switch: the add overlapped the move and waited out about the lock
// timeout. A 503 that came at once (a connection the move broke, say) or
// outside the move is a failure.
func (a refusedAdd) lockWait(moveStart, moveEnd time.Time) bool {
	return a.at.After(moveStart) && a.at.Add(-a.took).Before(moveEnd) &&
		a.took >= memory.DefaultLockTimeout-500*time.Millisecond
}

// loadResult is what the writers and the reader saw.
type loadResult struct {
	mu         sync.Mutex
	acked      []ackedWrite
	refused    []refusedAdd
	failedAdds []string
	reads      int
	failedRead []string
}

func (r *loadResult) ack(w ackedWrite) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acked = append(r.acked, w)
}

func (r *loadResult) refuse(a refusedAdd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused = append(r.refused, a)
}

func (r *loadResult) fail(list *[]string, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, what)
}

// TestCitusMoveUnderLoad moves a tenant to the other worker while 4
// writers and a reader use it through the memory service: no acknowledged
// write is lost, no read fails, and an add answers either 201 or, when it
// waited for the final switch longer than the lock timeout, 503 with
// Retry-After having written nothing (how long the switch blocks depends on
// the machine's load, not on the code). The move's duration and the longest
// add during it (the write pause of the final switch) are logged.
func TestCitusMoveUnderLoad(t *testing.T) {
	tn, res := newCitusTenant(t)
	srv := tn.serve(t, serverSetup{})
	ctx := testCtx(t)
	c, err := tenant.DetectCitus(ctx, tn.admin)
	if err != nil {
		t.Fatal(err)
	}
	target := c.Workers[0]
	if target == res.Worker {
		target = c.Workers[1]
	}
	// Some rows to copy: 2,000 memories of 20 owners, written as the admin.
	if _, err := tn.admin.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.memories (id, owner_id, source, category, content, embedding)
		SELECT gen_random_uuid(), 'seed-' || (g %% 20), 'user', 'project', 'seed fact number ' || g,
			(SELECT array_agg(random())::real[] FROM generate_series(1, %d) WHERE g > 0)::vector
		FROM generate_series(1, 2000) g`, tn.schema, testDims)); err != nil {
		t.Fatalf("seeding: %v", err)
	}

	lc := loadClient{srv: srv, client: &http.Client{Timeout: 30 * time.Second}}
	var out loadResult
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Bounded in count and time whatever the machine's speed.
	const maxOps = 5000
	deadline := time.Now().Add(3 * time.Minute)
	running := func(i int) bool {
		select {
		case <-stop:
			return false
		default:
			return i < maxOps && time.Now().Before(deadline)
		}
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("writer-%d", w)
			for i := 0; running(i); i++ {
				start := time.Now()
				content := fmt.Sprintf("writer %d wrote fact %d about topic %d", w, i, i*7919%1000)
				status, body, header := lc.callWithHeader("POST", memPath(owner, "memories"), map[string]any{"content": content})
				if status == http.StatusServiceUnavailable && header.Get("Retry-After") != "" {
					out.refuse(refusedAdd{owner: owner, content: content, at: time.Now(), took: time.Since(start)})
					continue
				}
				if status != http.StatusCreated {
					out.fail(&out.failedAdds, fmt.Sprintf("%s #%d: %d %s", owner, i, status, body))
					continue
				}
				var r memory.AddResult
				if err := json.Unmarshal(body, &r); err != nil {
					out.fail(&out.failedAdds, fmt.Sprintf("%s #%d: bad body %s", owner, i, body))
					continue
				}
				out.ack(ackedWrite{owner: owner, id: r.Memory.ID, content: content, at: time.Now(), took: time.Since(start)})
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; running(i); i++ {
			owner := fmt.Sprintf("seed-%d", i%20)
			status, body := lc.call("POST", memPath(owner, "search"), map[string]any{"query": "seed fact", "topK": 10})
			out.mu.Lock()
			out.reads++
			out.mu.Unlock()
			if status != http.StatusOK {
				out.fail(&out.failedRead, fmt.Sprintf("search %s: %d %s", owner, status, body))
			}
		}
	}()

	time.Sleep(2 * time.Second) // load before the move
	var progress []tenant.MoveProgress
	var moveStart time.Time
	// Other packages' tests move schemas on the same Citus cluster at the
	// same time (make test runs packages in parallel); the cluster runs one
	// move at a time and MoveSchema says so (ErrMoveInProgress): wait for
	// it, within a bound, as an operator would.
	var mv *tenant.MoveResult
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		progress, moveStart = progress[:0], time.Now()
		mv, err = tenant.MoveSchema(ctx, tn.admin, tenant.MoveSpec{Schema: tn.schema, Owner: tn.owner, To: target,
			Progress: func(p tenant.MoveProgress) { progress = append(progress, p) }})
		if !errors.Is(err, tenant.ErrMoveInProgress) || time.Now().After(deadline) {
			break
		}
	}
	moveEnd := time.Now()
	time.Sleep(2 * time.Second) // load after the move
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("MoveSchema: %v", err)
	}
	if !mv.Moved || mv.From != res.Worker || mv.To != target {
		t.Fatalf("MoveResult %+v, want a move from %s to %s", mv, res.Worker, target)
	}
	if p, err := tenant.SchemaPlacement(ctx, tn.admin, tn.schema); err != nil || p.Worker != target {
		t.Fatalf("placement after the move: %+v, %v; want %s", p, err, target)
	}

	// Every acknowledged write is there, read back through the service.
	for _, w := range out.acked {
		status, body := lc.call("GET", memPath(w.owner, "memories", w.id), nil)
		if status != http.StatusOK {
			t.Errorf("acknowledged write %s of %s lost after the move: %d %s", w.id, w.owner, status, body)
		}
	}
	if len(out.acked) == 0 {
		t.Fatalf("no add was acknowledged (%d refused with 503, %d failed)", len(out.refused), len(out.failedAdds))
	}
	// A refused add was a lock wait of the switch and wrote nothing (its
	// transaction rolled back whole); the same count finds an acknowledged
	// add, so it is not vacuous.
	stored := func(owner, content string) int {
		var n int
		if err := tn.admin.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s.memories WHERE owner_id = $1 AND content = $2`, tn.schema),
			owner, content).Scan(&n); err != nil {
			t.Fatalf("counting the rows of an add: %v", err)
		}
		return n
	}
	if n := stored(out.acked[0].owner, out.acked[0].content); n != 1 {
		t.Fatalf("%d rows hold acknowledged add %q of %s, want 1", n, out.acked[0].content, out.acked[0].owner)
	}
	for _, r := range out.refused {
		if !r.lockWait(moveStart, moveEnd) {
			t.Errorf("add %q of %s refused with 503 after %s, not a lock wait of the move's switch (%s to %s)",
				r.content, r.owner, r.took.Round(time.Millisecond), moveStart.Format(time.StampMilli), moveEnd.Format(time.StampMilli))
		}
		if n := stored(r.owner, r.content); n != 0 {
			t.Errorf("add %q of %s was refused with 503 but %d rows hold it", r.content, r.owner, n)
		}
	}
	if len(out.failedRead) > 0 {
		t.Errorf("%d of %d reads failed, e.g. %s", len(out.failedRead), out.reads, out.failedRead[0])
	}
	if len(out.failedAdds) > 0 {
		t.Errorf("%d adds failed, e.g. %s", len(out.failedAdds), out.failedAdds[0])
	}
	var during, outside []time.Duration
	for _, w := range out.acked {
		if w.at.After(moveStart) && w.at.Add(-w.took).Before(moveEnd) {
			during = append(during, w.took)
		} else {
			outside = append(outside, w.took)
		}
	}
	slices.Sort(outside)
	var longestOutside time.Duration
	if len(outside) > 0 {
		longestOutside = outside[len(outside)-1]
	}
	slices.Sort(during)
	var longest time.Duration
	if len(during) > 0 {
		longest = during[len(during)-1]
	}
	t.Logf("move %s -> %s took %s (%d progress readings); %d acknowledged adds (%d during the move: longest %s, median %s; outside it: longest %s, median %s), %d refused with 503 (none written), %d reads, 0 lost",
		mv.From, mv.To, mv.Duration.Round(time.Millisecond), len(progress), len(out.acked), len(during),
		longest.Round(time.Millisecond), median(during).Round(time.Millisecond),
		longestOutside.Round(time.Millisecond), median(outside).Round(time.Millisecond), len(out.refused), out.reads)
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// TestCitusLockTimeoutOnWorker: on Citus the owner's row lock is waited for
// on the worker, in a session Citus opens as the tenant's role, where the
// service's lock_timeout (a startup parameter of its coordinator session)
// does not reach; provisioning gives the role the service's default
// lock_timeout, so the wait still ends in 503 after about that long, not
// after the statement timeout.
func TestCitusLockTimeoutOnWorker(t *testing.T) {
	if memory.DefaultLockTimeout != tenant.CitusWorkerLockTimeout {
		t.Fatalf("tenant.CitusWorkerLockTimeout %s differs from memory.DefaultLockTimeout %s", tenant.CitusWorkerLockTimeout, memory.DefaultLockTimeout)
	}
	tn, _ := newCitusTenant(t)
	srv := tn.serve(t, serverSetup{args: []string{"--db-statement-timeout=60s"}})
	add := func(owner, content string) *response { return srv.addMemory(t, owner, content) }
	add("stuck", "Stuck plays the cello").want(t, 201)
	tn.holdOwnerLock(t, "stuck")
	start := time.Now()
	add("stuck", "Stuck also plays the viola").want(t, 503)
	if took := time.Since(start); took > 4*tenant.CitusWorkerLockTimeout {
		t.Fatalf("answered after %s, want about the workers' lock timeout of %s (the statement timeout is 60s)", took, tenant.CitusWorkerLockTimeout)
	}
	add("free", "Free plays the drums").want(t, 201)
}
