package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/engram-dev/engram/internal/memory"
)

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
	ceiling      func(conc int) opFunc // nil: no ceiling row
	// pgbench renders the raw statement of a few sample queries as pgbench
	// scripts; nil: no cross-check (writes).
	pgbench func(ctx context.Context) ([]string, error)
	// ceilingPgbench renders the ceiling query the same way (nil: no ceiling).
	ceilingPgbench func(ctx context.Context) ([]string, error)
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
		w := workload{name: mode + " search",
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
			},
			pgbench: h.pgbenchScripts(func(ctx context.Context, owner, q string) (string, []any, error) {
				return raw.searchSQL(ctx, memory.SearchMode(mode), owner, q, topK)
			}, seed+3)}
		if mode == "vector" {
			w.ceilingPgbench = h.pgbenchScripts(raw.ceilingSQL, seed+4)
			w.ceiling = func(conc int) opFunc {
				r := rngs(conc, seed+2)
				return func(ctx context.Context, w int) error {
					owner, q := pick(r[w])
					n, err := raw.ceiling(ctx, owner, q, topK)
					if err != nil {
						return err
					}
					return expectRows(n, topK)
				}
			}
		}
		return w
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
		},
		pgbench: h.pgbenchScripts(raw.contextSQL, 32)}
	return []workload{search("vector", 10), search("hybrid", 20), contextW, h.addWorkload("add (dedup)", api, raw, actions, 0)}
}

// pgbenchSamples is how many sample queries the pgbench cross-check
// rotates through (one script each; the owner is drawn per transaction).
const pgbenchSamples = 8

// crossCheck runs the scripts of one side with pgbench at concurrency c for
// the cell's duration and compares the harness's throughput with it.
func (h *harness) crossCheck(ctx context.Context, pgbench []string, url string, scripts func(context.Context) ([]string, error), c int, harnessOps float64) (*Pgbench, error) {
	sqls, err := scripts(ctx)
	if err != nil {
		return nil, err
	}
	tps, err := h.runPgbench(ctx, pgbench, url, sqls, c, h.scale.RunDuration)
	if err != nil {
		return nil, err
	}
	return &Pgbench{TPS: round3(tps), RawRatio: ratio(harnessOps, tps), Binary: pgbench[len(pgbench)-1]}, nil
}

// pgbenchScripts renders the raw statement of pgbenchSamples queries.
func (h *harness) pgbenchScripts(build func(ctx context.Context, owner, query string) (string, []any, error), seed uint64) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		rng := rand.New(rand.NewPCG(seed, 7))
		out := make([]string, 0, pgbenchSamples)
		for range pgbenchSamples {
			owner := ownerName(rng.IntN(h.scale.Owners))
			sql, args, err := build(ctx, owner, h.corpus.query(rng, owner, rng.IntN(h.scale.PerOwner)))
			if err != nil {
				return nil, err
			}
			script, err := pgbenchScript(sql, args, h.scale.Owners)
			if err != nil {
				return nil, err
			}
			out = append(out, script)
		}
		return out, nil
	}
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
