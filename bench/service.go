package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	engramworkload "github.com/engram-dev/engram/internal/workload"

	"github.com/engram-dev/engram/internal/localpod"
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
}

// Workload is one kind of request at one concurrency, through the service
// and as raw SQL, measured in alternating slices.
type Workload struct {
	Name        string   `json:"name"`
	Concurrency int      `json:"concurrency"`
	Service     RunStats `json:"service"`
	Raw         RunStats `json:"raw"`
	// Ratio is service throughput / raw throughput.
	Ratio float64 `json:"ratio"`
	// RowUpdates and HotUpdates are the memories rows updated while this
	// cell ran (pg_stat_user_tables; approximate, the counters are flushed
	// about once a second). Reads through the service update access
	// statistics; the raw side never updates.
	RowUpdates int64 `json:"rowUpdates"`
	HotUpdates int64 `json:"hotUpdates"`
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
	db, err := createDatabase(ctx, h.serverURL, "svc")
	if db != nil {
		defer h.dropDatabase("service database", db)
	}
	if err != nil {
		return nil, err
	}
	loginURL, err := provisionTenant(ctx, db, benchSchema, benchDims)
	if err != nil {
		return nil, err
	}
	policy := benchPolicy()
	svc, base, err := h.startService(ctx, loginURL, policy, false)
	if err != nil {
		return nil, err
	}
	defer svc.stop(30 * time.Second)
	api := newAPIClient(base, benchToken)

	h.logf("service: loading %d owners x %d memories (+ %d small owners) through the batch API", sc.Owners, sc.PerOwner, len(sc.SmallOwners))
	if rep.Load, err = h.load(ctx, api); err != nil {
		return nil, err
	}
	h.logf("service: loaded %d memories in %.1fs (%.0f/s)", rep.Load.Items, rep.Load.ElapsedSec, rep.Load.ItemsPerSec)
	pool, err := memory.NewPool(ctx, loginURL, int32(maxConcurrency(sc)+2), memory.SessionSettings{})
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if err := settleTable(ctx, db.URL, benchSchema); err != nil {
		return nil, err
	}
	rep.TableMiB, _ = tableMiB(ctx, pool, benchSchema)

	emb, err := memory.NewBuiltinEmbedder(benchDims)
	if err != nil {
		return nil, err
	}
	raw := newRawSQL(pool, benchSchema, policy, emb)
	h.logf("service: recall of %d searches against brute force", sc.RecallQueries)
	if rep.Quality, err = h.quality(ctx, api, raw); err != nil {
		return nil, err
	}
	h.logf("service: recall@10 %.4f (min %.2f), small owners complete: %v", rep.Quality.RecallAt10, rep.Quality.MinRecall, rep.Quality.SmallOwnersComplete)

	werr := h.measureWorkloads(ctx, api, raw, rep)
	if peak, _, err := memoryKiB(svc.pid()); err == nil {
		rep.ServicePeakRSSMiB = round3(float64(peak) / 1024)
	}
	if werr != nil {
		return rep, werr
	}
	return rep, h.measureAsyncCommit(ctx, loginURL, policy, emb, rep)
}

// measureAsyncCommit runs the add workload once more against a service
// (and a raw pool) with synchronous_commit off — what a runtime with
// spec.database.synchronousCommit: "off" gets — so the report shows what
// durability costs next to the default. Read it on a server with fsync on
// (hack/pgvector.sh's default): with fsync off a WAL flush costs nothing.
func (h *harness) measureAsyncCommit(ctx context.Context, loginURL string, policy memory.Policy, emb memory.Embedder, rep *ServiceReport) error {
	svc, base, err := h.startService(ctx, loginURL, policy, true)
	if err != nil {
		return err
	}
	defer svc.stop(30 * time.Second)
	pool, err := memory.NewPool(ctx, loginURL, int32(maxConcurrency(h.scale)+2), memory.SessionSettings{AsynchronousCommit: true})
	if err != nil {
		return err
	}
	defer pool.Close()
	api := newAPIClient(base, benchToken)
	raw := newRawSQL(pool, benchSchema, policy, emb)
	// Other seeds: the texts of the first add workload are stored already.
	w := h.addWorkload("add (dedup), synchronous_commit off", api, raw, &counter{m: map[string]int{}}, 1000)
	for _, c := range h.scale.Concurrency {
		svcStats, rawStats := pairedRuns(ctx, c, h.scale.RunDuration, h.scale.Rounds, h.scale.MaxOpsPerRun, w.service(c), w.raw(c))
		wl := Workload{Name: w.name, Concurrency: c, Service: svcStats, Raw: rawStats, Ratio: ratio(svcStats.Throughput, rawStats.Throughput)}
		h.logf("service: %-13s c=%d  service %7.1f/s p99 %6.2fms | raw %7.1f/s p99 %6.2fms | ratio %.2f",
			w.name, c, svcStats.Throughput, svcStats.Latency.P99, rawStats.Throughput, rawStats.Latency.P99, wl.Ratio)
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
func (h *harness) measureWorkloads(ctx context.Context, api *apiClient, raw *rawSQL, rep *ServiceReport) error {
	sc := h.scale
	actions := &counter{m: map[string]int{}}
	var failed []string
	for _, w := range h.workloads(api, raw, actions) {
		for _, c := range sc.Concurrency {
			before, _ := rowUpdates(ctx, raw.pool, raw.schema)
			svcStats, rawStats := pairedRuns(ctx, c, sc.RunDuration, sc.Rounds, sc.MaxOpsPerRun, w.service(c), w.raw(c))
			wl := Workload{Name: w.name, Concurrency: c, Service: svcStats, Raw: rawStats, Ratio: ratio(svcStats.Throughput, rawStats.Throughput)}
			if after, err := rowUpdates(ctx, raw.pool, raw.schema); err == nil {
				wl.RowUpdates, wl.HotUpdates = after[0]-before[0], after[1]-before[1]
			}
			h.logf("service: %-13s c=%d  service %7.1f/s p99 %6.2fms | raw %7.1f/s p99 %6.2fms | ratio %.2f",
				w.name, c, svcStats.Throughput, svcStats.Latency.P99, rawStats.Throughput, rawStats.Latency.P99, wl.Ratio)
			rep.Workloads = append(rep.Workloads, wl)
			if n := svcStats.Errors + rawStats.Errors; n > 0 {
				failed = append(failed, fmt.Sprintf("%s c=%d: %d failed requests (service: %s; raw: %s)",
					w.name, c, n, svcStats.FirstError, rawStats.FirstError))
			}
		}
	}
	rep.AddActions = actions.m
	if len(failed) > 0 {
		return fmt.Errorf("workloads with failures: %s", strings.Join(failed, "; "))
	}
	return nil
}

func maxConcurrency(sc Scale) int {
	m := 1
	for _, c := range sc.Concurrency {
		m = max(m, c)
	}
	return m
}

// startService writes the config and tokens files the operator would mount
// and starts `manager serve` on a free loopback port.
func (h *harness) startService(ctx context.Context, loginURL string, policy memory.Policy, asyncCommit bool) (*process, string, error) {
	cfg := memory.ServiceConfig{
		Schema:             benchSchema,
		Embedding:          memory.EmbeddingConfig{Provider: memory.ProviderBuiltin, Dimensions: benchDims},
		Policy:             policy,
		AsynchronousCommit: asyncCommit,
	}
	name := "service"
	if asyncCommit {
		name = "service-async"
	}
	cfgPath := filepath.Join(h.workDir, name+"-config.yaml")
	tokPath := filepath.Join(h.workDir, name+"-tokens")
	if err := engramworkload.WriteServiceConfig(cfgPath, cfg); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(tokPath, []byte(benchToken+" role=admin name=bench\n"), 0o600); err != nil {
		return nil, "", err
	}
	port, err := localpod.FreePort()
	if err != nil {
		return nil, "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := startProcess("manager serve", h.managerBin,
		[]string{"serve", "--config=" + cfgPath, "--tokens-file=" + tokPath, "--listen=" + addr},
		[]string{naming.EnvDatabaseURL + "=" + loginURL}, filepath.Join(h.workDir, name+".log"))
	if err != nil {
		return nil, "", err
	}
	base := "http://" + addr
	if err := waitHTTP(ctx, p, base+"/readyz", 60*time.Second); err != nil {
		p.stop(5 * time.Second)
		return nil, "", err
	}
	return p, base, nil
}

// rngs gives each of conc workers a generator of its own, seeded for repeatable runs.
func rngs(conc int, seed uint64) []*rand.Rand {
	out := make([]*rand.Rand, conc)
	for i := range out {
		out[i] = rand.New(rand.NewPCG(seed, uint64(i)))
	}
	return out
}

// workload is one kind of request with its service and raw implementations.
type workload struct {
	name         string
	service, raw func(conc int) opFunc
}

// workloads are the four measured request kinds; add comes last because it
// grows the owners the searches read.
func (h *harness) workloads(api *apiClient, raw *rawSQL, actions *counter) []workload {
	sc := h.scale
	// pick chooses a large owner and a query about one of its memories.
	pick := func(rng *rand.Rand) (string, string) {
		owner := ownerName(rng.IntN(sc.Owners))
		return owner, h.corpus.query(rng, owner, rng.IntN(sc.PerOwner))
	}
	search := func(mode string, seed uint64) workload {
		return workload{name: mode + " search",
			service: func(conc int) opFunc {
				r := rngs(conc, seed)
				return func(ctx context.Context, w int) error {
					owner, q := pick(r[w])
					var res apiSearchResult
					if err := api.post(ctx, ownerPath(owner, "/search"), map[string]any{"query": q, "mode": mode, "topK": topK}, &res); err != nil {
						return err
					}
					return expectRows(len(res.Results), topK)
				}
			},
			raw: func(conc int) opFunc {
				r := rngs(conc, seed+1)
				return func(ctx context.Context, w int) error {
					owner, q := pick(r[w])
					n, err := map[string]func(context.Context, string, string, int) (int, error){
						"vector": raw.vectorSearch, "hybrid": raw.hybridSearch}[mode](ctx, owner, q, topK)
					if err != nil {
						return err
					}
					return expectRows(n, topK)
				}
			}}
	}
	contextW := workload{name: "context",
		service: func(conc int) opFunc {
			r := rngs(conc, 30)
			return func(ctx context.Context, w int) error {
				owner, q := pick(r[w])
				var res apiContextResult
				if err := api.post(ctx, ownerPath(owner, "/context"), map[string]any{"query": q, "maxTokens": 1000}, &res); err != nil {
					return err
				}
				return expectRows(min(len(res.IDs), 1), 1)
			}
		},
		raw: func(conc int) opFunc {
			r := rngs(conc, 31)
			return func(ctx context.Context, w int) error {
				owner, q := pick(r[w])
				n, err := raw.contextCandidates(ctx, owner, q)
				if err != nil {
					return err
				}
				return expectRows(min(n, 1), 1)
			}
		}}
	return []workload{search("vector", 10), search("hybrid", 20), contextW, h.addWorkload("add (dedup)", api, raw, actions, 0)}
}

// addWorkload writes fresh memories through the service and the raw SQL.
func (h *harness) addWorkload(name string, api *apiClient, raw *rawSQL, actions *counter, seed uint64) workload {
	sc := h.scale
	return workload{name: name,
		service: func(conc int) opFunc {
			r := rngs(conc, seed+40+uint64(conc))
			return func(ctx context.Context, w int) error {
				owner := ownerName(r[w].IntN(sc.Owners))
				var res apiAddResult
				if err := api.post(ctx, ownerPath(owner, "/memories"), h.corpus.fresh(r[w]), &res); err != nil {
					return err
				}
				actions.add(res.Action)
				if res.Action != string(memory.ActionAdded) {
					return fmt.Errorf("add answered %q; the workload writes fresh texts", res.Action)
				}
				return nil
			}
		},
		raw: func(conc int) opFunc {
			r := rngs(conc, seed+50+uint64(conc))
			return func(ctx context.Context, w int) error {
				return raw.add(ctx, ownerName(r[w].IntN(sc.Owners)), h.corpus.fresh(r[w]))
			}
		}}
}

// counter tallies the dedup actions the service answered, across workers.
type counter struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counter) add(k string) {
	c.mu.Lock()
	c.m[k]++
	c.mu.Unlock()
}

func expectRows(got, want int) error {
	if got < want {
		return fmt.Errorf("%d rows, want %d", got, want)
	}
	return nil
}
