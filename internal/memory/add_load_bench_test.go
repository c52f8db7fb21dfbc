package memory

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAddLoad measures add with dedup at 1 and 4 clients on a tenant
// laid out like the service benchmark's: owners of 1,000 memories each
// (ENGRAM_ADD_OWNERS, default 40), loaded interleaved across owners with an
// 'add' history row each, then VACUUM ANALYZE; every add writes a fresh
// text to a random owner (an insert, the common case), with the per-owner
// cap at the largest allowed (2,000) as in the benchmark. b.N is the number
// of adds per cell; besides adds/s it reports, per add, the heap rows the
// index scans fetched (idx_tup_fetch) and the heap pages touched of the
// memories table, and the WAL bytes of the whole server (other sessions
// included: read it as an upper bound).
//
//	go test ./internal/memory -run '^$' -bench BenchmarkAddLoad -benchtime 2000x
func BenchmarkAddLoad(b *testing.B) {
	owners := 40
	if v := os.Getenv("ENGRAM_ADD_OWNERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			b.Fatalf("ENGRAM_ADD_OWNERS=%q must be 1..1000", v)
		}
		owners = n
	}
	f := newFixture(b, withPolicy(func(p *Policy) { p.Limits.MaxMemoriesPerOwner = MaxMemoriesPerOwnerLimit }))
	seedOwners(b, f, owners, 1000)
	var seq atomic.Int64
	for _, c := range addClients(b) {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			before := readAddIO(b, f)
			cpuBefore := addCPU(b, f)
			var lat []time.Duration
			var mu sync.Mutex
			start := time.Now()
			b.ResetTimer()
			var wg sync.WaitGroup
			var failed atomic.Value
			per := (b.N + c - 1) / c
			for w := range c {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), uint64(seq.Add(1000003))))
					mine := make([]time.Duration, 0, per)
					for range per {
						i := seq.Add(1)
						t0 := time.Now()
						res, err := f.store.Add(ctx(b), AddRequest{Owner: fmt.Sprintf("owner-%04d", r.IntN(owners)), Content: scaleText(r, 5_000_000+int(i))})
						if err == nil && res.Action != ActionAdded {
							err = fmt.Errorf("a fresh text was %s", res.Action)
						}
						if err != nil {
							failed.Store(err)
							return
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if err, ok := failed.Load().(error); ok {
				b.Fatal(err)
			}
			cpuAfter := addCPU(b, f)
			after := readAddIO(b, f)
			n := float64(len(lat))
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
			b.ReportMetric(ms(cpuAfter.backends-cpuBefore.backends), "pg-cpu-ms/op")
			b.ReportMetric(ms(cpuAfter.client-cpuBefore.client), "client-cpu-ms/op")
			reportLatency(b, lat)
			b.ReportMetric(n/elapsed.Seconds(), "adds/s")
			b.ReportMetric(float64(after.fetches-before.fetches)/n, "heap-fetches/op")
			b.ReportMetric(float64(after.heapPages-before.heapPages)/n, "heap-pages/op")
			b.ReportMetric(float64(after.walBytes-before.walBytes)/n, "wal-B/op")
		})
	}
}

// addClients reads ENGRAM_ADD_CLIENTS (default "1,4").
func addClients(b *testing.B) []int {
	spec := os.Getenv("ENGRAM_ADD_CLIENTS")
	if spec == "" {
		return []int{1, 4}
	}
	var out []int
	for _, s := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 64 {
			b.Fatalf("ENGRAM_ADD_CLIENTS=%q must be client counts within 1..64", spec)
		}
		out = append(out, n)
	}
	return out
}

// seedOwners writes perOwner memories for each of owners owners
// (owner-0000...), interleaved across owners as organic growth lays them
// out, each with its 'add' history row and each owner with its lock row,
// then vacuums and analyzes.
func seedOwners(b *testing.B, f *fixture, owners, perOwner int) {
	b.Helper()
	start := time.Now()
	r := rand.New(rand.NewPCG(uint64(owners), 3))
	var ows, cs, vs []string
	flush := func() {
		insertScaleRows(b, f, ows, cs, vs, 48*time.Hour)
		ows, cs, vs = ows[:0], cs[:0], vs[:0]
	}
	for i := range owners * perOwner {
		text := scaleText(r, i)
		ows, cs, vs = append(ows, fmt.Sprintf("owner-%04d", i%owners)), append(cs, text), append(vs, scaleVector(b, f, text))
		if len(ows) == 2000 {
			flush()
		}
	}
	if len(ows) > 0 {
		flush()
	}
	for _, sql := range []string{
		`INSERT INTO ` + f.store.sql.history + ` (memory_id, owner_id, action, actor, new_content, details)
			SELECT id, owner_id, 'add', source, content, '{"similarity": 0.1}' FROM ` + f.store.sql.memories,
		`INSERT INTO ` + f.store.sql.ownerLocks + ` (owner_id) SELECT DISTINCT owner_id FROM ` + f.store.sql.memories,
		`VACUUM (ANALYZE) ` + f.store.sql.memories,
		`VACUUM (ANALYZE) ` + f.store.sql.history,
		`VACUUM (ANALYZE) ` + f.store.sql.ownerLocks,
	} {
		if _, err := f.admin.Exec(ctx(b), sql); err != nil {
			b.Fatalf("%s: %v", sql, err)
		}
	}
	b.Logf("seeded %d owners x %d memories in %s", owners, perOwner, time.Since(start).Round(time.Millisecond))
}

// addIO is a reading of the memories table's counters and the server's WAL.
type addIO struct{ fetches, heapPages, walBytes int64 }

func readAddIO(b *testing.B, f *fixture) addIO {
	b.Helper()
	time.Sleep(1100 * time.Millisecond) // backends flush statistics at most once a second
	var io addIO
	err := f.admin.QueryRow(ctx(b), `SELECT coalesce(s.idx_tup_fetch, 0), coalesce(io.heap_blks_hit, 0) + coalesce(io.heap_blks_read, 0),
			(SELECT wal_bytes::bigint FROM pg_stat_wal)
		FROM pg_stat_user_tables s JOIN pg_statio_user_tables io USING (relid)
		WHERE s.schemaname = $1 AND s.relname = 'memories'`, f.store.core.Schema).Scan(&io.fetches, &io.heapPages, &io.walBytes)
	if err != nil {
		b.Fatal(err)
	}
	return io
}

// cpuReading is the CPU time used so far by the store's PostgreSQL
// backends (from /proc: the server runs on this machine in the test
// environment; 0 when it does not) and by this process. On a shared machine
// CPU per add is steadier than adds per second.
type cpuReading struct{ backends, client time.Duration }

func addCPU(b *testing.B, f *fixture) cpuReading {
	b.Helper()
	var r cpuReading
	var pids []int
	rows, err := f.store.core.Pool.Query(ctx(b), `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND usename = current_user`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if rows.Err() != nil {
		b.Fatal(rows.Err())
	}
	for _, pid := range pids {
		r.backends += procCPU(fmt.Sprintf("/proc/%d/stat", pid))
	}
	r.client = procCPU("/proc/self/stat")
	return r
}

// procCPU is utime + stime of a /proc/<pid>/stat file (clock ticks of 10 ms).
func procCPU(path string) time.Duration {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
