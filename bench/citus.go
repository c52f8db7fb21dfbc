package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/tenant"
)

// CitusReport is the memory service on a tenant of a Citus coordinator
// beside the same service on the plain PostgreSQL tenant of the service
// part, in the same run (issue 30): the same binary, policy, embedder and
// owners, the same requests (same seeds), in alternating slices.
type CitusReport struct {
	Version string   `json:"version"`
	Workers []string `json:"workers"`
	// Worker holds the tenant's distributed schema.
	Worker string `json:"worker"`
	// Settings are the coordinator's PostgreSQL settings that matter here.
	Settings string    `json:"settings"`
	Load     LoadStats `json:"load"`
	// TopUp is how many fresh memories were added to the Citus tenant's
	// owners so each has as many active memories as on plain PostgreSQL
	// (where the service part's add workloads wrote before).
	TopUp int `json:"topUp"`
	// Memories are the active memories of each tenant when measured.
	Memories      int       `json:"memories"`
	PlainMemories int       `json:"plainMemories"`
	Quality       Quality   `json:"quality"`
	Workloads     []CitusWL `json:"workloads"`
}

// CitusWL is one workload at one concurrency through the service on
// both databases.
type CitusWL struct {
	Name        string   `json:"name"`
	Concurrency int      `json:"concurrency"`
	Plain       RunStats `json:"plain"`
	Citus       RunStats `json:"citus"`
	// Ratio is the service's throughput on Citus / on plain PostgreSQL:
	// higher is better; 1 means Citus costs nothing.
	Ratio    float64  `json:"ratio"`
	PlainCPU CPUPerOp `json:"plainCpuPerOp"`
	CitusCPU CPUPerOp `json:"citusCpuPerOp"`
}

// goalCitusRatio is issue 30's goal: the service on Citus at least 0.8 of
// the service on plain PostgreSQL, for each of the four workloads.
const goalCitusRatio = 0.8

// citusAddSeed seeds the add workload of the Citus comparison: texts
// neither tenant has (the service part's adds used seeds 0 and 1000).
const citusAddSeed = 2000

// plainSide is the service part's tenant on plain PostgreSQL, still running.
type plainSide struct {
	api *apiClient
	svc *process
	db  *benchDB
	raw *rawSQL
}

// measureOnCitus provisions a tenant on a Citus coordinator of its own
// database, starts a second `manager serve` for it, loads it as the plain
// tenant was loaded, and measures both services side by side.
func (h *harness) measureOnCitus(ctx context.Context, plain plainSide, policy memory.Policy, emb memory.Embedder, rep *ServiceReport) error {
	if h.citusURL == "" {
		rep.CitusNote = "not measured: CITUS_URL is not set (make bench starts hack/citus.sh)"
		h.logf("service: %s", rep.CitusNote)
		return nil
	}
	db, err := createCitusDatabase(ctx, h.citusURL, "svc")
	if db != nil {
		defer h.dropCitus(db)
	}
	if err != nil {
		return fmt.Errorf("citus: %w", err)
	}
	cr := &CitusReport{Version: db.version, Workers: db.workers}
	rep.Citus = cr
	loginURL, err := provisionCitusTenant(ctx, db, cr)
	if err != nil {
		return fmt.Errorf("citus: provisioning the tenant: %w", err)
	}
	cr.Settings, _ = serverInfo(ctx, db.URL)
	svc, err := h.startService(ctx, "service-citus", loginURL, policy, false)
	if err != nil {
		return fmt.Errorf("citus: %w", err)
	}
	defer svc.stop()
	api := svc.api
	h.logf("citus: Citus %s, workers %v; the tenant's schema is on %s; loading it like the plain one", cr.Version, cr.Workers, cr.Worker)
	if cr.Load, err = h.load(ctx, api); err != nil {
		return fmt.Errorf("citus: %w", err)
	}
	h.logf("citus: loaded %d memories in %.1fs (%.0f/s; plain: %.0f/s)", cr.Load.Items, cr.Load.ElapsedSec, cr.Load.ItemsPerSec, rep.Load.ItemsPerSec)
	pool, err := h.servicePool(ctx, loginURL, memory.SessionSettings{})
	if err != nil {
		return err
	}
	defer pool.Close()
	raw, err := newRawSQL(pool, policy, emb)
	if err != nil {
		return err
	}
	defer raw.close()
	if err := h.topUp(ctx, api, plain.raw, raw, cr); err != nil {
		return fmt.Errorf("citus: %w", err)
	}
	for _, u := range []string{plain.db.URL, db.URL} {
		if err := settleTable(ctx, u, benchSchema); err != nil {
			return fmt.Errorf("citus: %w", err)
		}
	}
	if cr.Quality, err = h.quality(ctx, api, raw); err != nil {
		return fmt.Errorf("citus: %w", err)
	}
	h.logf("citus: recall@10 %.4f (min %.2f), small owners complete: %v", cr.Quality.RecallAt10, cr.Quality.MinRecall, cr.Quality.SmallOwnersComplete)
	meters := [2]cpuMeter{
		{servicePID: plain.svc.pid(), database: plain.db.name},
		{servicePID: svc.proc.pid(), database: db.name, coordinatorPort: db.coordinatorPort},
	}
	return h.compareOnCitus(ctx, [2]*apiClient{plain.api, api}, raw, meters, cr)
}

// compareOnCitus runs each workload at each concurrency on both services
// in alternating slices, with the CPU of each side's processes.
func (h *harness) compareOnCitus(ctx context.Context, apis [2]*apiClient, raw *rawSQL, meters [2]cpuMeter, cr *CitusReport) error {
	sc := h.scale
	var sides [2][]workload
	for i, api := range apis {
		ws := h.workloads(api, raw, &counter{m: map[string]int{}})
		ws[len(ws)-1] = h.addWorkload("add (dedup)", api, raw, &counter{m: map[string]int{}}, citusAddSeed)
		sides[i] = ws
	}
	var failed []string
	for w := range sides[0] {
		name := sides[0][w].name
		for _, c := range sc.Concurrency {
			res := meteredRuns(ctx, c, sc.RunDuration, sc.Rounds, sc.MaxOpsPerRun,
				meteredSide{op: sides[0][w].service(c), meter: meters[0]},
				meteredSide{op: sides[1][w].service(c), meter: meters[1]})
			wl := CitusWL{Name: name, Concurrency: c, Plain: res[0].stats, Citus: res[1].stats,
				Ratio: ratio(res[1].stats.Throughput, res[0].stats.Throughput), PlainCPU: res[0].cpu, CitusCPU: res[1].cpu}
			cr.Workloads = append(cr.Workloads, wl)
			h.logf("citus: %-13s c=%d  plain %7.1f/s p99 %6.2fms cpu %.2fms/op | citus %7.1f/s p99 %6.2fms cpu %.2fms/op (coordinator %.2f, workers %.2f) | citus/plain %.2f | load %s",
				name, c, wl.Plain.Throughput, wl.Plain.Latency.P99, wl.PlainCPU.TotalMs(), wl.Citus.Throughput, wl.Citus.Latency.P99,
				wl.CitusCPU.TotalMs(), wl.CitusCPU.CoordinatorMs, wl.CitusCPU.WorkersMs, wl.Ratio, loadAvg())
			if n := wl.Plain.Errors + wl.Citus.Errors; n > 0 {
				failed = append(failed, fmt.Sprintf("%s c=%d: %d failed requests (plain: %s; citus: %s)", name, c, n, wl.Plain.FirstError, wl.Citus.FirstError))
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("citus: workloads with failures: %s", strings.Join(failed, "; "))
	}
	return nil
}

// provisionCitusTenant provisions the bench tenant through the coordinator
// (internal/tenant distributes its schema) and returns the login URL.
func provisionCitusTenant(ctx context.Context, db *citusDB, cr *CitusReport) (string, error) {
	admin, err := pgxpool.New(ctx, db.URL)
	if err != nil {
		return "", fmt.Errorf("opening admin pool: %w", err)
	}
	defer admin.Close()
	db.roles = append(db.roles, tenant.LoginRole(benchSchema), tenant.OwnerRole(benchSchema))
	res, err := tenant.Provision(ctx, admin, tenant.Spec{Schema: benchSchema, Dimensions: benchDims,
		Owner: tenant.Owner{UID: "bench-citus-" + benchSchema, Namespace: "bench-citus-" + benchSchema, Name: benchSchema}})
	if err != nil {
		return "", err
	}
	if !res.Citus || res.Worker == "" {
		return "", fmt.Errorf("the schema was not distributed (citus %v, worker %q)", res.Citus, res.Worker)
	}
	cr.Worker = res.Worker
	return tenant.LoginURL(db.URL, res.LoginRole, res.Password)
}

// topUp adds fresh memories to the Citus tenant's owners until each has as
// many active memories as on plain PostgreSQL, so both sides search
// owners of the same size.
func (h *harness) topUp(ctx context.Context, api *apiClient, plain, citus *rawSQL, cr *CitusReport) error {
	want, err := activeByOwner(ctx, plain)
	if err != nil {
		return err
	}
	have, err := activeByOwner(ctx, citus)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(citusAddSeed, 1))
	for owner, n := range want {
		cr.PlainMemories += n
		for missing := n - have[owner]; missing > 0; missing -= loadBatch {
			items := make([]item, 0, min(missing, loadBatch))
			for range cap(items) {
				items = append(items, h.corpus.fresh(rng))
			}
			var res apiBatchResult
			if err := api.post(ctx, ownerPath(owner, "/memories/batch"), map[string]any{"items": items}, &res); err != nil {
				return fmt.Errorf("topping up %s: %w", owner, err)
			}
			cr.TopUp += len(items)
		}
	}
	after, err := activeByOwner(ctx, citus)
	if err != nil {
		return err
	}
	for _, n := range after {
		cr.Memories += n
	}
	h.logf("citus: topped up %d memories: %d active on Citus, %d on plain PostgreSQL", cr.TopUp, cr.Memories, cr.PlainMemories)
	return nil
}

func activeByOwner(ctx context.Context, raw *rawSQL) (map[string]int, error) {
	rows, err := raw.pool.Query(ctx, `SELECT owner_id, count(*)::int FROM `+raw.memories+` WHERE active GROUP BY owner_id`)
	if err != nil {
		return nil, fmt.Errorf("counting active memories by owner: %w", err)
	}
	out := map[string]int{}
	var owner string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&owner, &n}, func() error {
		out[owner] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("counting active memories by owner: %w", err)
	}
	return out, nil
}

// dropCitus drops the Citus database unless --keep-db asks to keep it.
func (h *harness) dropCitus(db *citusDB) {
	if h.keepDB {
		h.logf("kept Citus database %s (roles %v) on %v", db.name, db.roles, db.nodes)
		return
	}
	h.cleanup("Citus service database", db.drop)
}
