package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/engram-dev/engram/internal/localpod"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	engramworkload "github.com/engram-dev/engram/internal/workload"
)

// ServiceReport is the memory service part of the results.
type ServiceReport struct {
	Memories    int            `json:"memories"`
	Owners      int            `json:"owners"`
	PerOwner    int            `json:"perOwner"`
	SmallOwners []int          `json:"smallOwners"`
	Load        LoadStats      `json:"load"`
	Quality     Quality        `json:"quality"`
	Workloads   []Workload     `json:"workloads"`
	AddActions  map[string]int `json:"addActions"`
	// ServicePeakRSSMiB is VmHWM of the `manager serve` process at the end.
	ServicePeakRSSMiB float64 `json:"servicePeakRssMiB"`
	// TableMiB is the size of the memories table with its indexes after loading.
	TableMiB float64 `json:"tableMiB"`
	// SettledCeiling is the ceiling query at c=1 right after VACUUM, before
	// any search wrote access statistics (visibility map current), with its
	// cost per operation: beside the ceiling rows of the table (measured
	// after searches through the service cleared all-visible bits) it shows
	// what the access-statistics writes cost the index-only scan.
	SettledCeiling *RunStats `json:"settledCeiling,omitempty"`
	SettledPerOp   *PerOp    `json:"settledCeilingPerOp,omitempty"`
	// Citus is the same service on a tenant of a Citus coordinator, beside
	// this one (citus.go); CitusNote says why it is absent.
	Citus     *CitusReport `json:"citus,omitempty"`
	CitusNote string       `json:"citusNote,omitempty"`
}

// Workload is one kind of request at one concurrency, through the service
// and as raw SQL (and, for vector search, the ceiling query), measured in
// alternating slices.
type Workload struct {
	Name        string   `json:"name"`
	Concurrency int      `json:"concurrency"`
	Service     RunStats `json:"service"`
	Raw         RunStats `json:"raw"`
	// Ratio is service throughput / raw throughput.
	Ratio float64 `json:"ratio"`
	// Ceiling is the least the work can cost (memory.CeilingSQL: the ids of
	// the top-K on the best access path), measured in the same slices;
	// CeilingRatio is service throughput / ceiling throughput.
	Ceiling      *RunStats `json:"ceiling,omitempty"`
	CeilingRatio float64   `json:"serviceCeilingRatio,omitempty"`
	// Pgbench runs the raw side's statement with PostgreSQL's own client at
	// the same concurrency right after the cell (nil: no pgbench found).
	Pgbench *Pgbench `json:"pgbench,omitempty"`
	// CeilingPgbench runs the ceiling query with pgbench the same way; its
	// RawRatio is the harness's ceiling throughput / pgbench's. It tells
	// whether the ceiling is PostgreSQL's limit on this machine or the
	// harness's client path.
	CeilingPgbench *Pgbench `json:"ceilingPgbench,omitempty"`
	// RowUpdates and HotUpdates are the memories rows updated while this
	// cell ran (pg_stat_user_tables; approximate, the counters are flushed
	// about once a second). Reads through the service update access
	// statistics; the raw side never updates.
	RowUpdates int64 `json:"rowUpdates"`
	HotUpdates int64 `json:"hotUpdates"`
	// NewSessions is how many database sessions were opened while the cell
	// ran (pg_stat_database): near 0 in a steady state; a pool that loses
	// connections shows here.
	NewSessions int64 `json:"newSessions"`
	// PerOp is what one operation of each side costs the memories table
	// (service, raw, ceiling), from a sequential probe after the c=1 cell.
	PerOp map[string]PerOp `json:"perOp,omitempty"`
	// ServiceCPU, RawCPU and CeilingCPU are the CPU milliseconds one
	// operation of each side cost over the cell's slices (cpu.go):
	// `manager serve` (service side only), the database's backends, and the
	// harness that generated the load.
	ServiceCPU *CPUPerOp `json:"serviceCpu,omitempty"`
	RawCPU     *CPUPerOp `json:"rawCpu,omitempty"`
	CeilingCPU *CPUPerOp `json:"ceilingCpu,omitempty"`
}

const (
	benchDims   = 384
	benchSchema = "engram_bench_svc"
	// benchToken is an admin token of the service (tokens shorter than 43
	// characters are refused at load).
	benchToken = "bench-token-0123456789abcdef-0123456789abcdef-bench"
	topK       = 10
)

// benchPolicy is the default policy with the per-owner cap raised to the
// largest allowed (2,000), above what the add workload writes (1,000 per
// owner plus a few dozen adds): at the default cap of 1,000 every add to a
// full owner would also evict one memory, work the raw ceiling does not do.
// The eviction path is not part of this comparison.
func benchPolicy() memory.Policy {
	p := memory.DefaultPolicy()
	p.Limits.MaxMemoriesPerOwner = memory.MaxMemoriesPerOwnerLimit
	return p
}

func ownerName(i int) string { return fmt.Sprintf("owner-%04d", i) }
func smallName(i int) string { return fmt.Sprintf("small-%d", i) }

// runService measures the memory service through its HTTP API against the
// raw SQL ceiling.
func (h *harness) runService(ctx context.Context) (*ServiceReport, error) {
	sc := h.scale
	rep := &ServiceReport{Memories: sc.Memories(), Owners: sc.Owners, PerOwner: sc.PerOwner, SmallOwners: sc.SmallOwners}
	tenant, stop, err := h.serveTenant(ctx, "svc", "service database", "service")
	defer stop()
	if err != nil {
		return nil, err
	}
	db, loginURL, svc, policy := tenant.db, tenant.loginURL, tenant.svc, benchPolicy()
	api := svc.api

	h.logf("service: loading %d owners x %d memories (+ %d small owners) through the batch API", sc.Owners, sc.PerOwner, len(sc.SmallOwners))
	if rep.Load, err = h.load(ctx, api); err != nil {
		return nil, err
	}
	h.logf("service: loaded %d memories in %.1fs (%.0f/s)", rep.Load.Items, rep.Load.ElapsedSec, rep.Load.ItemsPerSec)
	pool, err := h.servicePool(ctx, loginURL, memory.SessionSettings{})
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if err := settleTable(ctx, db.URL, benchSchema); err != nil {
		return nil, err
	}
	rep.TableMiB, _ = tableMiB(ctx, pool, benchSchema)

	raw, err := newBuiltinRawSQL(pool, policy)
	if err != nil {
		return nil, err
	}
	defer raw.close()
	raw.url = loginURL
	if err := h.settledCeiling(ctx, raw, rep); err != nil {
		return nil, err
	}
	h.logf("service: recall of %d searches against brute force", sc.RecallQueries)
	if rep.Quality, err = h.quality(ctx, api, raw); err != nil {
		return nil, err
	}
	h.logf("service: recall@10 %.4f (min %.2f), small owners complete: %v", rep.Quality.RecallAt10, rep.Quality.MinRecall, rep.Quality.SmallOwnersComplete)

	meters := sideMeters{service: cpuMeter{servicePID: svc.proc.pid(), database: db.name}, raw: cpuMeter{database: db.name}}
	werr := h.measureWorkloads(ctx, api, raw, meters, svc.pprofURL, rep)
	if peak, _, err := memoryKiB(svc.proc.pid()); err == nil {
		rep.ServicePeakRSSMiB = round3(float64(peak) / 1024)
	}
	if werr != nil {
		return rep, werr
	}
	if err := h.measureAsyncCommit(ctx, loginURL, db.name, policy, raw.embedder, rep); err != nil {
		return rep, err
	}
	return rep, h.measureOnCitus(ctx, plainSide{api: api, svc: svc.proc, db: db, raw: raw}, policy, raw.embedder, rep)
}

// settledCeiling measures the ceiling query on the freshly vacuumed table.
func (h *harness) settledCeiling(ctx context.Context, raw *rawSQL, rep *ServiceReport) error {
	r := rngs(1, 5)
	op := func(ctx context.Context, _ int) error {
		owner := ownerName(r[0].IntN(h.scale.Owners))
		n, err := raw.ceiling(ctx, owner, h.corpus.query(r[0], owner, r[0].IntN(h.scale.PerOwner)), topK)
		if err != nil {
			return err
		}
		return expectRows(n, topK)
	}
	ps, err := probe(ctx, raw.pool, raw.schema, op)
	if err != nil {
		return fmt.Errorf("probing the settled ceiling: %w", err)
	}
	p := ps[0]
	st := runLoad(ctx, 1, h.scale.RunDuration, h.scale.MaxOpsPerRun, op).stats()
	rep.SettledCeiling, rep.SettledPerOp = &st, &p
	h.logf("service: ceiling on the vacuumed table, c=1: %.1f/s p99 %.2fms; per op %+v; load %s", st.Throughput, st.Latency.P99, p, loadAvg())
	return nil
}

// measureAsyncCommit runs the add workload once more against a service
// (and a raw pool) with synchronous_commit off — what a runtime with
// spec.database.synchronousCommit: "off" gets — so the report shows what
// durability costs next to the default. Read it on a server with fsync on
// (hack/pgvector.sh's default): with fsync off a WAL flush costs nothing.
func (h *harness) measureAsyncCommit(ctx context.Context, loginURL, dbName string, policy memory.Policy, emb memory.Embedder, rep *ServiceReport) error {
	svc, err := h.startService(ctx, "service-async", loginURL, policy, true)
	if err != nil {
		return err
	}
	defer svc.stop()
	pool, err := h.servicePool(ctx, loginURL, memory.SessionSettings{AsynchronousCommit: true})
	if err != nil {
		return err
	}
	defer pool.Close()
	api := svc.api
	raw, err := newRawSQL(pool, policy, emb)
	if err != nil {
		return err
	}
	defer raw.close()
	// Other seeds: the texts of the first add workload are stored already.
	w := h.addWorkload("add (dedup), synchronous_commit off", api, raw, &counter{m: map[string]int{}}, 1000)
	meters := sideMeters{service: cpuMeter{servicePID: svc.proc.pid(), database: dbName}, raw: cpuMeter{database: dbName}}
	for _, c := range h.scale.Concurrency {
		wl := meters.pair(ctx, h.scale, w, c)
		svcStats, rawStats := wl.Service, wl.Raw
		h.logf("service: %-13s c=%d  service %7.1f/s p99 %6.2fms | raw %7.1f/s p99 %6.2fms | ratio %.2f | %s",
			w.name, c, svcStats.Throughput, svcStats.Latency.P99, rawStats.Throughput, rawStats.Latency.P99, wl.Ratio, wl.cpuLine())
		rep.Workloads = append(rep.Workloads, wl)
		if n := svcStats.Errors + rawStats.Errors; n > 0 {
			return fmt.Errorf("%s c=%d: %d failed requests (service: %s; raw: %s)", w.name, c, n, svcStats.FirstError, rawStats.FirstError)
		}
	}
	return nil
}

// measureWorkloads runs every workload at every concurrency, service and raw
// in alternating slices. Failed requests are counted in the cells and make
// the part fail once all cells ran, so a broken side is never read as slow.
func (h *harness) measureWorkloads(ctx context.Context, api *apiClient, raw *rawSQL, meters sideMeters, pprofURL string, rep *ServiceReport) error {
	sc := h.scale
	actions := &counter{m: map[string]int{}}
	var failed []string
	pgbench := pgbenchBinary()
	if pgbench == nil {
		h.logf("service: no pgbench found ($PGBENCH, PATH, /usr/lib/postgresql, the root of hack/pgvector.sh): no cross-check")
	}
	for _, w := range h.workloads(api, raw, actions) {
		for _, c := range sc.Concurrency {
			var prof *profileRun
			if pprofURL != "" && w.name == "vector search" && c == 1 {
				prof = h.startProfile(ctx, pprofURL, "vector-search-c1", cellDuration(sc, 3))
			}
			wl, err := h.measureCell(ctx, w, c, raw, meters, pgbench)
			prof.wait()
			if err != nil {
				return err
			}
			rep.Workloads = append(rep.Workloads, wl)
			if n := wl.Service.Errors + wl.Raw.Errors; n > 0 {
				failed = append(failed, fmt.Sprintf("%s c=%d: %d failed requests (service: %s; raw: %s)",
					w.name, c, n, wl.Service.FirstError, wl.Raw.FirstError))
			}
		}
	}
	rep.AddActions = actions.m
	if len(failed) > 0 {
		return fmt.Errorf("workloads with failures: %s", strings.Join(failed, "; "))
	}
	return nil
}

// measureCell measures one workload at one concurrency: the sides in
// alternating slices, the table's counters over the cell, pgbench on the raw
// statement, and after the c=1 cell a probe of each side's cost per operation.
func (h *harness) measureCell(ctx context.Context, w workload, c int, raw *rawSQL, meters sideMeters, pgbench []string) (Workload, error) {
	sc := h.scale
	sides := []opFunc{w.service(c), w.raw(c)}
	metered := []meteredSide{{op: sides[0], meter: meters.service}, {op: sides[1], meter: meters.raw}}
	if w.ceiling != nil {
		sides = append(sides, w.ceiling(c))
		metered = append(metered, meteredSide{op: sides[2], meter: meters.raw})
	}
	before, berr := readTableIO(ctx, raw.pool, raw.schema)
	res := meteredRuns(ctx, c, sc.RunDuration, sc.Rounds, sc.MaxOpsPerRun, metered...)
	st := make([]RunStats, len(res))
	for i, r := range res {
		st[i] = r.stats
	}
	wl := Workload{Name: w.name, Concurrency: c, Service: st[0], Raw: st[1], Ratio: ratio(st[0].Throughput, st[1].Throughput),
		ServiceCPU: &res[0].cpu, RawCPU: &res[1].cpu}
	if len(res) > 2 {
		wl.CeilingCPU = &res[2].cpu
	}
	if after, err := readTableIO(ctx, raw.pool, raw.schema); err == nil && berr == nil {
		d := after.minus(before)
		wl.RowUpdates, wl.HotUpdates, wl.NewSessions = d.updates, d.hot, d.sessions
	}
	line := fmt.Sprintf("service: %-13s c=%d  service %7.1f/s p99 %6.2fms | raw %7.1f/s p99 %6.2fms | ratio %.2f",
		w.name, c, st[0].Throughput, st[0].Latency.P99, st[1].Throughput, st[1].Latency.P99, wl.Ratio)
	if len(st) > 2 {
		wl.Ceiling = &st[2]
		wl.CeilingRatio = ratio(st[0].Throughput, st[2].Throughput)
		line += fmt.Sprintf(" | ceiling %7.1f/s (service/ceiling %.2f)", st[2].Throughput, wl.CeilingRatio)
	}
	if pgbench != nil && w.pgbench != nil {
		pb, err := h.crossCheck(ctx, pgbench, raw.url, w.pgbench, c, st[1].Throughput)
		if err != nil {
			return wl, fmt.Errorf("%s c=%d: pgbench cross-check: %w", w.name, c, err)
		}
		wl.Pgbench = pb
		line += fmt.Sprintf(" | pgbench %7.1f tps (raw/pgbench %.2f)", pb.TPS, pb.RawRatio)
	}
	if pgbench != nil && w.ceilingPgbench != nil && wl.Ceiling != nil {
		pb, err := h.crossCheck(ctx, pgbench, raw.url, w.ceilingPgbench, c, wl.Ceiling.Throughput)
		if err != nil {
			return wl, fmt.Errorf("%s c=%d: pgbench cross-check of the ceiling: %w", w.name, c, err)
		}
		wl.CeilingPgbench = pb
		line += fmt.Sprintf(" | ceiling pgbench %7.1f tps (ceiling/pgbench %.2f)", pb.TPS, pb.RawRatio)
	}
	h.logf("%s | %s | new sessions %d, load %s", line, wl.cpuLine(), wl.NewSessions, loadAvg())
	if c == 1 {
		ps, err := probe(ctx, raw.pool, raw.schema, sides...)
		if err != nil {
			return wl, fmt.Errorf("%s: probing the cost per operation: %w", w.name, err)
		}
		wl.PerOp = map[string]PerOp{}
		for i, name := range []string{"service", "raw", "ceiling"}[:len(ps)] {
			wl.PerOp[name] = ps[i]
		}
		h.logf("service: %-13s per op: %v", w.name, wl.PerOp)
	}
	return wl, nil
}

func maxConcurrency(sc Scale) int {
	m := 1
	for _, c := range sc.Concurrency {
		m = max(m, c)
	}
	return m
}

// benchService is a running `manager serve` and a client of it holding the
// bench's admin token.
type benchService struct {
	proc *process
	api  *apiClient
	// pprofURL is the base of its pprof listener ("": the harness runs
	// without --pprof).
	pprofURL string
}

// stop ends the service, giving it the time a Pod's termination grace
// period would.
func (s *benchService) stop() { s.proc.stop(30 * time.Second) }

// startService writes the config and tokens files the operator would mount
// and starts `manager serve` on a free loopback port; name names its files.
func (h *harness) startService(ctx context.Context, name, loginURL string, policy memory.Policy, asyncCommit bool) (*benchService, error) {
	return h.startServiceConfig(ctx, name, loginURL, benchServiceConfig(policy, asyncCommit))
}

// benchServiceConfig is the config startService serves a tenant with.
func benchServiceConfig(policy memory.Policy, asyncCommit bool) memory.ServiceConfig {
	return memory.ServiceConfig{
		Schema:             benchSchema,
		Embedding:          memory.EmbeddingConfig{Provider: memory.ProviderBuiltin, Dimensions: benchDims},
		Policy:             policy,
		AsynchronousCommit: asyncCommit,
	}
}

// startServiceConfig is startService with a config of the caller's (the
// reembed part serves a tenant with another embedder after its switch).
func (h *harness) startServiceConfig(ctx context.Context, name, loginURL string, cfg memory.ServiceConfig) (*benchService, error) {
	return startServiceBin(ctx, h, h.managerBin, name, loginURL, cfg)
}

// startServiceBin is startServiceConfig of the manager binary bin (the
// conversation part's --ab-manager serves a second build beside the first).
func startServiceBin(ctx context.Context, h *harness, bin, name, loginURL string, cfg memory.ServiceConfig) (*benchService, error) {
	cfgPath := filepath.Join(h.workDir, name+"-config.yaml")
	tokPath := filepath.Join(h.workDir, name+"-tokens")
	if err := engramworkload.WriteServiceConfig(cfgPath, cfg); err != nil {
		return nil, err
	}
	if err := os.WriteFile(tokPath, []byte(benchToken+" role=admin name=bench\n"), 0o600); err != nil {
		return nil, err
	}
	port, err := localpod.FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// The rate limit at its maximum: the bench token takes every request
	// (the limit's bookkeeping is still measured); no metrics listener.
	args := []string{"serve", "--config=" + cfgPath, "--tokens-file=" + tokPath, "--listen=" + addr, "--metrics-listen=0",
		"--rate-limit-per-minute=6000000", "--rate-limit-burst=100000"}
	pprofURL := ""
	if h.pprofDir != "" {
		pport, err := localpod.FreePort()
		if err != nil {
			return nil, err
		}
		args = append(args, fmt.Sprintf("--pprof-listen=127.0.0.1:%d", pport))
		pprofURL = fmt.Sprintf("http://127.0.0.1:%d", pport)
	}
	p, err := startProcess("manager serve", bin, args,
		[]string{naming.EnvDatabaseURL + "=" + loginURL}, filepath.Join(h.workDir, name+".log"))
	if err != nil {
		return nil, err
	}
	base := "http://" + addr
	if err := waitHTTP(ctx, p, base+"/readyz", 60*time.Second); err != nil {
		p.stop(5 * time.Second)
		return nil, err
	}
	return &benchService{proc: p, api: newAPIClient(base, benchToken), pprofURL: pprofURL}, nil
}
