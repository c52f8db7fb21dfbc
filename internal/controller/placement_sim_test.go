package controller

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Per-tenant costs measured on PostgreSQL 17 + pgvector 0.8 (docs/scale-out.md):
// an empty tenant's 52 relations take about 0.75 MiB, a memory about 2.6 KiB
// with its indexes (384 dimensions).
const (
	simEmptyTenant = 768 << 10
	simPerMemory   = 2662
)

// simTenantSizes draws n tenant sizes (bytes) from a Zipf law: most tenants
// are small, a few are very large — how a fleet of teams looks.
func simTenantSizes(n int, seed uint64) []int64 {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	z := rand.NewZipf(r, 1.3, 1, 20_000)
	out := make([]int64, n)
	for i := range out {
		memories := 100 * (1 + int64(z.Uint64())) // 100 .. 2,000,100 memories
		out[i] = simEmptyTenant + memories*simPerMemory
	}
	return out
}

type simServer struct {
	tenants []int64 // sizes
	bytes   int64
}

// simulatePlacement places tenants one after the other with place. The
// size a server reports (bytesUsed) is what its tenants have grown to by
// then when grown is true, else only their empty schemas (tenants fill up
// after their placement, the usual case).
func simulatePlacement(sizes []int64, servers int, maxTenants, maxBytes int64, grown bool) ([]simServer, error) {
	ss := make([]simServer, servers)
	req := bySelector("tier=std")
	for i, size := range sizes {
		cands := make([]candidate, servers)
		for j := range ss {
			reported := int64(len(ss[j].tenants)) * simEmptyTenant
			if grown {
				reported = ss[j].bytes
			}
			cands[j] = db(fmt.Sprintf("pg-%02d", j), tenants(int64(len(ss[j].tenants)), maxTenants), func(c *candidate) { c.bytes, c.maxBytes = reported, maxBytes })
		}
		got := place(req, cands)
		if got.database == "" {
			return nil, fmt.Errorf("tenant %d not placed: %s", i, got.message)
		}
		var j int
		if _, err := fmt.Sscanf(got.database, "pg-%02d", &j); err != nil {
			return nil, err
		}
		ss[j].tenants = append(ss[j].tenants, size)
		ss[j].bytes += size
	}
	return ss, nil
}

// rebalanceMoves counts the moves a greedy rebalance would make so that no
// server holds more than limit bytes: the largest tenant of the fullest
// server that fits under the limit elsewhere goes to the emptiest server,
// until none is over the limit (or nothing can move).
func rebalanceMoves(ss []simServer, limit int64) (moves int, moved int64) {
	ss = slices.Clone(ss)
	for i := range ss {
		ss[i].tenants = slices.Clone(ss[i].tenants)
		slices.Sort(ss[i].tenants)
	}
	for range 100_000 {
		hi, lo := 0, 0
		for i := range ss {
			if ss[i].bytes > ss[hi].bytes {
				hi = i
			}
			if ss[i].bytes < ss[lo].bytes {
				lo = i
			}
		}
		if ss[hi].bytes <= limit {
			return moves, moved
		}
		// The largest tenant whose move leaves the receiver under the limit.
		k := -1
		for x := len(ss[hi].tenants) - 1; x >= 0; x-- {
			if ss[lo].bytes+ss[hi].tenants[x] <= limit {
				k = x
				break
			}
		}
		if k < 0 {
			return moves, moved // a tenant larger than the room anywhere
		}
		t := ss[hi].tenants[k]
		ss[hi].tenants = slices.Delete(ss[hi].tenants, k, k+1)
		ss[hi].bytes -= t
		ss[lo].tenants = append(ss[lo].tenants, t)
		slices.Sort(ss[lo].tenants)
		ss[lo].bytes += t
		moves++
		moved += t
	}
	return moves, moved
}

// TestPlacementSimulation places 10,000 tenants of Zipf-distributed sizes
// over 4, 8 and 16 servers with the operator's own placement function and
// reports the balance, the largest server and what a rebalance to within
// 10 % of the mean would move (docs/scale-out.md quotes it). The placement
// must respect every capacity and spread tenant counts evenly.
func TestPlacementSimulation(t *testing.T) {
	const n = 10_000
	sizes := simTenantSizes(n, 30)
	sorted := slices.Sorted(slices.Values(sizes))
	var total int64
	for _, s := range sizes {
		total += s
	}
	q := func(p float64) string { return formatBytes(sorted[int(p*float64(n-1))]) }
	t.Logf("10,000 tenants, %s in all: median %s, p90 %s, p99 %s, largest %s (the largest 1%% hold %.0f%% of the bytes)",
		formatBytes(total), q(0.5), q(0.9), q(0.99), formatBytes(sorted[n-1]), 100*float64(sumTop(sorted, n/100))/float64(total))
	var rows []string
	for _, servers := range []int{4, 8, 16} {
		maxTenants := int64(n/servers) * 5 / 4
		maxBytes := total / int64(servers) * 3 / 2
		for _, grown := range []bool{false, true} {
			ss, err := simulatePlacement(sizes, servers, maxTenants, maxBytes, grown)
			if err != nil {
				t.Fatal(err)
			}
			minT, maxT, maxB := int64(n), int64(0), int64(0)
			for _, s := range ss {
				c := int64(len(s.tenants))
				minT, maxT, maxB = min(minT, c), max(maxT, c), max(maxB, s.bytes)
				if c > maxTenants {
					t.Errorf("%d servers: one holds %d tenants, over its capacity %d", servers, c, maxTenants)
				}
			}
			if !grown && maxT-minT > 1 {
				t.Errorf("%d servers: tenant counts %d..%d, want them within one", servers, minT, maxT)
			}
			mean := total / int64(servers)
			moves, moved := rebalanceMoves(ss, mean*11/10)
			sizesSeen := "empty schemas"
			if grown {
				sizesSeen = "grown tenants"
			}
			rows = append(rows, fmt.Sprintf("| %d | %s | %d..%d | %s | %.2f | %d | %s |",
				servers, sizesSeen, minT, maxT, formatBytes(maxB), float64(maxB)/float64(mean), moves, formatBytes(moved)))
		}
	}
	t.Logf("\n| servers | sizes placement sees | tenants per server | largest server | largest / mean | moves to within 10 %% of the mean | bytes moved |\n|---|---|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
}

func sumTop(sorted []int64, k int) int64 {
	var s int64
	for _, v := range sorted[len(sorted)-k:] {
		s += v
	}
	return s
}
