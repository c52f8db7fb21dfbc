package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// The client vectors part (--parts=clientvectors, issue 31): a client that
// embeds itself sends `embedding` on add and `vector` on search. On a
// tenant of the filters part's size it loads half the owners with client
// embeddings and half without, checks that search with a client vector is
// exact (recall@10 against brute force over the owner's rows, computed here
// in Go: it must be 1.0), and measures add and search with client vectors
// beside the same requests embedded by the service, all in the same
// alternating slices, with the CPU each costs. The "client" is this
// harness with the runtime's own builtin embedder, so both sides rank the
// same vectors; its embedding work is done before the timed requests (the
// pools below) and never counts as the service's.

// ClientVectorsReport is the client vectors part of the results.
type ClientVectorsReport struct {
	Owners   int `json:"owners"`
	PerOwner int `json:"perOwner"`
	// LoadClient is the batches of the even owners, sent with `embedding`;
	// LoadServer the odd owners', embedded by the service; in turns.
	LoadClient LoadStats `json:"loadClient"`
	LoadServer LoadStats `json:"loadServer"`
	// Recall is vector search with a client `vector` against brute force.
	Recall []ClientVectorRecall `json:"recall"`
	// Rows are the measured requests at concurrency 1.
	Rows []ClientVectorRow `json:"rows"`
}

// ClientVectorRecall is the recall of one kind of client vector.
type ClientVectorRecall struct {
	Vectors string  `json:"vectors"`
	Queries int     `json:"queries"`
	Recall  float64 `json:"recallAt10"`
	Min     float64 `json:"minRecall"`
}

// ClientVectorRow is one request kind, embedded by the service (Server)
// and with the client's vector (Client).
type ClientVectorRow struct {
	Name string `json:"name"`
	// ServerBytes and ClientBytes are the JSON body of one request of each side.
	ServerBytes int      `json:"serverBodyBytes"`
	ClientBytes int      `json:"clientBodyBytes"`
	Server      RunStats `json:"server"`
	Client      RunStats `json:"client"`
	// ServerCPU and ClientCPU are `manager serve` and its database's
	// backends per operation (the harness's embedding is not in them).
	ServerCPU CPUPerOp `json:"serverCpu"`
	ClientCPU CPUPerOp `json:"clientCpu"`
	// Throughput is client/server ops per second; CPU client/server CPU
	// (service and database) per operation; ServeCPU client/server of the
	// `manager serve` process alone.
	Throughput float64 `json:"throughputRatio"`
	CPU        float64 `json:"cpuRatio"`
	ServeCPU   float64 `json:"serveCpuRatio"`
}

// clientVectorItem is a memory with the client's embedding of its content.
type clientVectorItem struct {
	item
	Embedding []float32 `json:"embedding,omitempty"`
}

// cvPart holds the client vectors part's steps (the harness has enough
// methods of its own).
type cvPart struct{ *harness }

func (h *harness) runClientVectors(ctx context.Context) (*ClientVectorsReport, error) {
	return (&cvPart{h}).run(ctx)
}

func (h *cvPart) run(ctx context.Context) (*ClientVectorsReport, error) {
	sc := h.scale
	owners := max(2, sc.FilterOwners) // one owner of each kind at least
	rep := &ClientVectorsReport{Owners: owners, PerOwner: sc.PerOwner}
	tenant, stop, err := h.serveTenant(ctx, "cvec", "client vectors database", "clientvectors")
	defer stop()
	if err != nil {
		return nil, err
	}
	db, svc := tenant.db, tenant.svc
	emb, err := memory.NewBuiltinEmbedder(benchDims)
	if err != nil {
		return nil, err
	}
	h.logf("clientvectors: loading %d owners x %d memories, even owners with client embeddings", owners, sc.PerOwner)
	if rep.LoadClient, rep.LoadServer, err = h.loadClientVectors(ctx, svc.api, emb, owners); err != nil {
		return nil, err
	}
	h.logf("clientvectors: loaded %.0f items/s with client embeddings, %.0f/s embedded by the service",
		rep.LoadClient.ItemsPerSec, rep.LoadServer.ItemsPerSec)
	if err := settleTable(ctx, db.URL, benchSchema); err != nil {
		return nil, err
	}
	pool, err := h.servicePool(ctx, tenant.loginURL, memory.SessionSettings{})
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	raw, err := newRawSQL(pool, benchPolicy(), emb)
	if err != nil {
		return nil, err
	}
	defer raw.close()
	if rep.Recall, err = h.clientVectorRecall(ctx, svc.api, raw, owners); err != nil {
		return nil, err
	}
	for _, r := range rep.Recall {
		h.logf("clientvectors: %s: recall@10 %.4f (min %.2f) over %d queries", r.Vectors, r.Recall, r.Min, r.Queries)
	}
	rep.Rows, err = h.measureClientVectors(ctx, svc, db, emb, owners)
	return rep, err
}

// loadClientVectors writes every memory through the batch API, owners
// interleaved; the even owners' batches carry the client's embeddings.
func (h *cvPart) loadClientVectors(ctx context.Context, api *apiClient, emb memory.Embedder, owners int) (LoadStats, LoadStats, error) {
	per := h.scale.PerOwner
	mk := func() LoadStats { return LoadStats{BatchSize: loadBatch, Concurrency: 1, Actions: map[string]int{}} }
	st := [2]LoadStats{mk(), mk()} // client, server
	var spent [2]time.Duration
	ctx, cancel := context.WithTimeout(ctx, time.Duration(owners*per/20+60)*time.Second)
	defer cancel()
	for from := 0; from < per; from += loadBatch {
		for o := range owners {
			owner, side := ownerName(o), o%2
			items := make([]clientVectorItem, 0, loadBatch)
			for i := from; i < min(from+loadBatch, per); i++ {
				items = append(items, clientVectorItem{item: h.corpus.stored(owner, i)})
			}
			if side == 0 { // the client embeds before it sends, outside the timed request
				for i := range items {
					v, err := emb.Embed(ctx, []string{items[i].Content})
					if err != nil {
						return st[0], st[1], err
					}
					items[i].Embedding = v[0]
				}
			}
			var res apiBatchResult
			start := time.Now()
			if err := api.post(ctx, ownerPath(owner, "/memories/batch"), map[string]any{"items": items}, &res); err != nil {
				return st[0], st[1], fmt.Errorf("loading %s: %w", owner, err)
			}
			spent[side] += time.Since(start)
			st[side].Requests++
			for _, r := range res.Results {
				st[side].Actions[r.Action]++
				st[side].Items++
			}
		}
	}
	for i := range st {
		st[i].ElapsedSec = round3(spent[i].Seconds())
		if spent[i] > 0 {
			st[i].ItemsPerSec = round3(float64(st[i].Items) / spent[i].Seconds())
		}
	}
	return st[0], st[1], nil
}

// randomUnitVector is a direction no embedder of the runtime produced (a
// client's other model, say): exactness must not depend on the vectors.
func randomUnitVector(rng *rand.Rand) []float32 {
	v := make([]float32, benchDims)
	var norm float64
	for i := range v {
		x := rng.NormFloat64()
		v[i] = float32(x)
		norm += x * x
	}
	if norm == 0 {
		v[0], norm = 1, 1
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / math.Sqrt(norm))
	}
	return v
}

// exactRecall is the share of the exact top-k of rows by cosine distance
// to vec that got holds (ids of a search's results); a returned row as far
// as the k-th within tieTolerance counts, equal distances come in any
// order. An owner with no rows has nothing to miss.
func exactRecall(vec []float32, rows []ownerRow, got []string, k int) float64 {
	dist := make(map[string]float64, len(rows))
	all := make([]float64, 0, len(rows))
	for _, r := range rows {
		d := cosineDistance(vec, r.vec)
		dist[r.id] = d
		all = append(all, d)
	}
	sort.Float64s(all)
	want := min(k, len(all))
	if want == 0 {
		return 1
	}
	hit := 0
	for _, id := range got {
		if d, ok := dist[id]; ok && d <= all[want-1]+tieTolerance {
			hit++
		}
	}
	return float64(min(hit, want)) / float64(want)
}

// clientVectorRecall sends vector searches with a client `vector` (no query
// text) and compares each answer with brute force over the owner's rows.
func (h *cvPart) clientVectorRecall(ctx context.Context, api *apiClient, raw *rawSQL, owners int) ([]ClientVectorRecall, error) {
	kinds := []string{"builtin embedding of a query (the runtime's model)", "random unit vectors (another model)"}
	out := make([]ClientVectorRecall, len(kinds))
	sums := make([]float64, len(kinds))
	for i, k := range kinds {
		out[i] = ClientVectorRecall{Vectors: k, Min: 1}
	}
	perKind := max(1, min(h.scale.RecallQueries/len(kinds), 100))
	rng := rand.New(rand.NewPCG(31, 31))
	cache := map[string][]ownerRow{}
	for q := range perKind {
		owner := ownerName(q % owners)
		rows, ok := cache[owner]
		if !ok {
			var err error
			if rows, err = ownerRows(ctx, raw, owner); err != nil {
				return nil, err
			}
			cache[owner] = rows
		}
		qv, err := raw.embed(ctx, h.corpus.query(rng, owner, rng.IntN(h.scale.PerOwner)))
		if err != nil {
			return nil, err
		}
		for i, vec := range [][]float32{qv, randomUnitVector(rng)} {
			var res apiSearchResult
			if err := api.post(ctx, ownerPath(owner, "/search"), map[string]any{"mode": "vector", "vector": vec, "topK": topK}, &res); err != nil {
				return nil, err
			}
			ids := make([]string, len(res.Results))
			for j, r := range res.Results {
				ids[j] = r.Memory.ID
			}
			r := exactRecall(vec, rows, ids, topK)
			sums[i] += r
			out[i].Min = math.Min(out[i].Min, r)
			out[i].Queries++
		}
	}
	for i := range out {
		out[i].Recall = round3(sums[i] / float64(max(1, out[i].Queries)))
	}
	return out, nil
}

func clientVectorsMarkdown(p printer, c *ClientVectorsReport) {
	p("## Client vectors\n\n")
	p("%d owners x %d memories loaded through the batch API (owners interleaved): the even owners' batches with `embedding` "+
		"(the harness's builtin embedder, the runtime's own model, run before the timed request), the odd owners' embedded by the service.\n\n", c.Owners, c.PerOwner)
	p("| load | items | items/s |\n|---|---|---|\n| with `embedding` | %d | %.0f |\n| embedded by the service | %d | %.0f |\n\n",
		c.LoadClient.Items, c.LoadClient.ItemsPerSec, c.LoadServer.Items, c.LoadServer.ItemsPerSec)
	p("| vector search with a client `vector` | queries | recall@10 vs brute force | min |\n|---|---|---|---|\n")
	for _, r := range c.Recall {
		p("| %s | %d | %.4f | %.2f |\n", r.Vectors, r.Queries, r.Recall, r.Min)
	}
	p("\nConcurrency 1, every side in the same alternating slices; the same search texts on both sides of a search row, fresh texts for adds. " +
		"Client vectors are the builtin embedder's (sparse: a few dozen non-zero values, short JSON) or, in the dense rows, random unit vectors " +
		"(every value non-zero: the JSON a real model's vector makes). CPU per operation: `manager serve` and its database backends " +
		"(the harness's embedding is in neither); serve: `manager serve` alone.\n\n")
	p("| request | body bytes server / client | server ops/s | p50 ms | p99 ms | CPU ms/op (serve) | client ops/s | p50 ms | p99 ms | CPU ms/op (serve) | client/server ops/s | client/server CPU (serve) |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range c.Rows {
		p("| %s | %d / %d | %.1f | %.2f | %.2f | %.2f (%.3f) | %.1f | %.2f | %.2f | %.2f (%.3f) | %.2f | %.2f (%.2f) |\n", r.Name, r.ServerBytes, r.ClientBytes,
			r.Server.Throughput, r.Server.Latency.P50, r.Server.Latency.P99, r.ServerCPU.TotalMs(), r.ServerCPU.ServiceMs,
			r.Client.Throughput, r.Client.Latency.P50, r.Client.Latency.P99, r.ClientCPU.TotalMs(), r.ClientCPU.ServiceMs, r.Throughput, r.CPU, r.ServeCPU)
	}
	p("\n")
}
