package tenant

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// citusListAnswer is a tenant's server that says "Citus coordinator" and
// lists 1.5 million one-letter workers (30 MiB, under MaxServerAnswer).
func citusListAnswer(q string) fakeAnswer {
	if strings.Contains(q, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')") {
		return fakeAnswer{cols: []fakeCol{{"exists", 16}}, rows: func(emit func(...string) bool) { emit("t") }}
	}
	a, _ := citusAnswer(q, func(emit func(...string) bool) {
		for range 1_500_000 {
			if !emit("a", "1") {
				return
			}
		}
	})
	return a
}

// TestCitusWorkerListIsBounded (issue 26's tenth review, HIGH 1):
// DetectCitus, run by every pass and by every reaper look, kept every
// pg_dist_node row a server listed (1.5 million from a tenant's server,
// 49 MiB live). Past maxListedCitusWorkers it fails with a
// *TooManyRowsError and keeps none.
func TestCitusWorkerListIsBounded(t *testing.T) {
	conn := fakeConn(t, fakePG(t, citusListAnswer))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stop := testenv.HeapPeak(5 * time.Millisecond)
	c, err := DetectCitus(ctx, conn)
	grew := stop()
	var tooMany *TooManyRowsError
	if !errors.As(err, &tooMany) || tooMany.Limit != maxListedCitusWorkers {
		t.Fatalf("DetectCitus on a server listing 1.5 million workers: %d kept, %v; want a *TooManyRowsError of %d", len(c.Workers), err, maxListedCitusWorkers)
	}
	if grew > 16<<20 { // the fake server's own buffers included
		t.Errorf("DetectCitus refused the list, but the heap grew by %d MiB on the way; want under 16 MiB", grew>>20)
	}
}

// TestReaperLooksReadNoWorkerList (issue 26's tenth review, HIGH 1): the
// reaper ran DetectCitus at every look, so 16 looks at once on tenants'
// servers listing 1.5 million workers went past 900 MiB of heap. Now a
// look asks only whether the server is a coordinator: the 16 looks end
// with ErrReaperOnCitus and the heap stays small.
func TestReaperLooksReadNoWorkerList(t *testing.T) {
	const looks = 16
	url := fakePG(t, citusListAnswer)
	conns := make([]querier, looks)
	for i := range conns {
		conns[i] = fakeConn(t, url)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stop := testenv.HeapPeak(5 * time.Millisecond)
	go cancelPast(ctx, cancel, 512<<20) // bounded, should the looks read it all
	errs := make([]error, looks)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { _, errs[i] = (&Reaper{}).Look(ctx, c) })
	}
	wg.Wait()
	grew := stop()
	for i, err := range errs {
		if !errors.Is(err, ErrReaperOnCitus) {
			t.Fatalf("look %d on a tenant's server saying coordinator: %v; want ErrReaperOnCitus", i, err)
		}
	}
	t.Logf("%d reaper looks at once on servers listing 1.5 million workers: the heap grew by %d MiB at most", looks, grew>>20)
	if grew > 128<<20 {
		t.Errorf("%d reaper looks at once: the heap grew by %d MiB; want under 128 MiB", looks, grew>>20)
	}
}

// holdersAnswer lists n young sessions of marked tenant roles, each with
// the virtual transaction id vxid(i).
func holdersAnswer(n int, vxid func(int) string) func(string) fakeAnswer {
	return func(q string) fakeAnswer {
		switch {
		case strings.Contains(q, "SELECT EXISTS (SELECT 1 FROM pg_extension"):
			return fakeAnswer{cols: []fakeCol{{"exists", 16}}, rows: func(emit func(...string) bool) { emit("f") }}
		case strings.Contains(q, "FROM pg_extension"): // no citus
			return fakeAnswer{cols: []fakeCol{{"extversion", 25}}}
		case strings.Contains(q, "FROM pg_stat_activity a"):
			return fakeAnswer{cols: []fakeCol{{"pid", 23}, {"usesysid", 26}, {"rolname", 25}, {"c", 25}, {"vxid", 25}, {"age", 701}},
				rows: func(emit func(...string) bool) {
					for i := range n {
						if !emit(strconv.Itoa(1000+i), "16400", "engram_rt_login", markerPrefix+"; uid=u1; runtime=team-a/mem", vxid(i), "1") {
							return
						}
					}
				}}
		}
		return fakeAnswer{}
	}
}

// TestReaperSeenIsBounded (issue 26's tenth review, MEDIUM 1): the reaper
// kept each listed session's virtual transaction id, as the server sent
// it, between looks: 9,999 young sessions with 3 KiB ids kept 30 MiB a
// node. A row with a field longer than any real one is now skipped before
// it is copied, and an honest id is kept as two numbers: the same count of
// real-looking sessions keeps under 1 MiB.
func TestReaperSeenIsBounded(t *testing.T) {
	const sessions = 9_999
	for _, tc := range []struct {
		name string
		vxid func(int) string
		kept int
	}{
		{"3 KiB ids", func(i int) string { return strings.Repeat("7", 3000) + strconv.Itoa(i) }, 0},
		{"real ids", func(i int) string { return "2147483647/" + strconv.Itoa(4294967295-i) }, sessions},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := fakeConn(t, fakePG(t, holdersAnswer(sessions, tc.vxid)))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			before := heapNow()
			rp := &Reaper{}
			held, err := rp.Look(ctx, conn)
			kept := heapNow() - before
			if err != nil || len(held) != 0 {
				t.Fatalf("a look at %d young sessions: %d ended, %v; want none and no error", sessions, len(held), err)
			}
			t.Logf("%s: the reaper keeps %d sessions, %d KiB between looks", tc.name, len(rp.seen), kept>>10)
			if len(rp.seen) != tc.kept {
				t.Errorf("the reaper keeps %d sessions; want %d", len(rp.seen), tc.kept)
			}
			if kept > 1<<20 {
				t.Errorf("the reaper keeps %d KiB between looks; want under 1 MiB", kept>>10)
			}
		})
	}
}

// TestVirtualXIDRoundTrips: the id the reaper ends a session by is the one
// pg_locks showed.
func TestVirtualXIDRoundTrips(t *testing.T) {
	for _, s := range []string{"3/1", "0/0", "2147483647/4294967295", "-1/7"} {
		v, ok := parseVirtualXID(s)
		if !ok || v.String() != s {
			t.Errorf("parseVirtualXID(%q) = %v, %v; want it back", s, v, ok)
		}
	}
	for _, s := range []string{"", "3", "3/", "/1", "a/1", "3/1/2", "3/4294967296"} {
		if _, ok := parseVirtualXID(s); ok {
			t.Errorf("parseVirtualXID(%q) accepted", s)
		}
	}
}

// cancelPast cancels ctx once the heap passes limit bytes.
func cancelPast(ctx context.Context, cancel context.CancelFunc, limit uint64) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapAlloc > limit {
			cancel()
		}
	}
}
