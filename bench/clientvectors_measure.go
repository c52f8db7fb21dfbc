package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/engram-dev/engram/internal/memory"
)

const (
	// cvQueries is the pool of searches (texts and vectors) both sides of
	// a search row cycle through, in the same order.
	cvQueries = 512
	// cvMaxOps bounds every side of the measured run (warm-up and rounds
	// each), so an add pool (2 x cvMaxOps fresh items) never runs out.
	cvMaxOps = 3000
)

// cvQuery is a search: an owner, a text, the client's vector of the text
// (the builtin embedder's: sparse, a few dozen non-zero values) and a
// dense unit vector (every value non-zero, as a model's are).
type cvQuery struct {
	owner, text string
	vec, dense  []float32
}

// cvAdd is a fresh memory and the client's vector of it (nil: the service
// embeds it).
type cvAdd struct {
	owner string
	item  item
	vec   []float32
}

// cvVectors says which vector a client side sends.
type cvVectors int

const (
	cvServer cvVectors = iota // none: the service embeds
	cvSparse                  // the builtin embedder's, as the service would compute it
	cvDense                   // a dense unit vector: the JSON a real model's vector makes
)

// cvPools builds the searches and one pool of fresh memories per add side
// (server, sparse, server again, dense), all embedded here before any timing.
func (h *cvPart) cvPools(ctx context.Context, emb memory.Embedder, owners int) ([]cvQuery, [4][]cvAdd, error) {
	rng := rand.New(rand.NewPCG(31, 77))
	queries := make([]cvQuery, cvQueries)
	for i := range queries {
		owner := ownerName(rng.IntN(owners))
		queries[i] = cvQuery{owner: owner, text: h.corpus.query(rng, owner, rng.IntN(h.scale.PerOwner)), dense: randomUnitVector(rng)}
		v, err := emb.Embed(ctx, []string{queries[i].text})
		if err != nil {
			return nil, [4][]cvAdd{}, err
		}
		queries[i].vec = v[0]
	}
	var adds [4][]cvAdd
	kinds := [4]cvVectors{cvServer, cvSparse, cvServer, cvDense}
	for side, kind := range kinds {
		adds[side] = make([]cvAdd, 2*cvMaxOps)
		for i := range adds[side] {
			a := cvAdd{owner: ownerName(rng.IntN(owners)), item: h.corpus.fresh(rng)}
			switch kind {
			case cvSparse:
				v, err := emb.Embed(ctx, []string{a.item.Content})
				if err != nil {
					return nil, [4][]cvAdd{}, err
				}
				a.vec = v[0]
			case cvDense:
				a.vec = randomUnitVector(rng)
			}
			adds[side][i] = a
		}
	}
	return queries, adds, nil
}

// cvSearchBody is the search request of a side.
func cvSearchBody(q cvQuery, mode string, vectors cvVectors) map[string]any {
	req := map[string]any{"mode": mode, "topK": topK}
	if mode == "hybrid" || vectors == cvServer {
		req["query"] = q.text
	}
	switch vectors {
	case cvSparse:
		req["vector"] = q.vec
	case cvDense:
		req["vector"] = q.dense
	}
	return req
}

// jsonBytes is the size of v's JSON (0 if it has none).
func jsonBytes(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// measureClientVectors measures vector search, hybrid search and add, each
// embedded by the service and with the client's vector, and vector search
// and add with dense client vectors beside another server side of each:
// all ten sides in the same alternating slices at concurrency 1.
func (h *cvPart) measureClientVectors(ctx context.Context, svc *benchService, db *benchDB, emb memory.Embedder, owners int) ([]ClientVectorRow, error) {
	queries, adds, err := h.cvPools(ctx, emb, owners)
	if err != nil {
		return nil, err
	}
	meter := cpuMeter{servicePID: svc.proc.pid(), database: db.name}
	search := func(mode string, vectors cvVectors) opFunc {
		var next atomic.Int64
		return func(ctx context.Context, _ int) error {
			q := queries[int(next.Add(1)-1)%len(queries)]
			var res apiSearchResult
			if err := svc.api.post(ctx, ownerPath(q.owner, "/search"), cvSearchBody(q, mode, vectors), &res); err != nil {
				return err
			}
			return expectRows(len(res.Results), topK)
		}
	}
	add := func(pool []cvAdd) opFunc {
		var next atomic.Int64
		return func(ctx context.Context, _ int) error {
			i := int(next.Add(1) - 1)
			if i >= len(pool) {
				return fmt.Errorf("add pool of %d fresh memories used up", len(pool))
			}
			a := pool[i]
			var res apiAddResult
			if err := svc.api.post(ctx, ownerPath(a.owner, "/memories"), clientVectorItem{item: a.item, Embedding: a.vec}, &res); err != nil {
				return err
			}
			if res.Action != string(memory.ActionAdded) {
				return fmt.Errorf("add answered %q; the workload writes fresh texts", res.Action)
			}
			return nil
		}
	}
	q0 := queries[0]
	rows := []ClientVectorRow{
		{Name: "vector search", ServerBytes: jsonBytes(cvSearchBody(q0, "vector", cvServer)), ClientBytes: jsonBytes(cvSearchBody(q0, "vector", cvSparse))},
		{Name: "hybrid search", ServerBytes: jsonBytes(cvSearchBody(q0, "hybrid", cvServer)), ClientBytes: jsonBytes(cvSearchBody(q0, "hybrid", cvSparse))},
		{Name: "add (dedup)", ServerBytes: jsonBytes(clientVectorItem{item: adds[0][0].item}), ClientBytes: jsonBytes(clientVectorItem{item: adds[1][0].item, Embedding: adds[1][0].vec})},
		{Name: "vector search, dense vector", ServerBytes: jsonBytes(cvSearchBody(q0, "vector", cvServer)), ClientBytes: jsonBytes(cvSearchBody(q0, "vector", cvDense))},
		{Name: "add (dedup), dense vector", ServerBytes: jsonBytes(clientVectorItem{item: adds[2][0].item}), ClientBytes: jsonBytes(clientVectorItem{item: adds[3][0].item, Embedding: adds[3][0].vec})},
	}
	sides := []meteredSide{
		{op: search("vector", cvServer), meter: meter}, {op: search("vector", cvSparse), meter: meter},
		{op: search("hybrid", cvServer), meter: meter}, {op: search("hybrid", cvSparse), meter: meter},
		{op: add(adds[0]), meter: meter}, {op: add(adds[1]), meter: meter},
		{op: search("vector", cvServer), meter: meter}, {op: search("vector", cvDense), meter: meter},
		{op: add(adds[2]), meter: meter}, {op: add(adds[3]), meter: meter},
	}
	res := meteredRuns(ctx, 1, h.scale.RunDuration, h.scale.Rounds, min(h.scale.MaxOpsPerRun, cvMaxOps), sides...)
	var failed []string
	for i := range rows {
		s, c := res[2*i], res[2*i+1]
		r := &rows[i]
		r.Server, r.Client, r.ServerCPU, r.ClientCPU = s.stats, c.stats, s.cpu, c.cpu
		r.Throughput, r.CPU = ratio(c.stats.Throughput, s.stats.Throughput), ratio(c.cpu.TotalMs(), s.cpu.TotalMs())
		r.ServeCPU = ratio(c.cpu.ServiceMs, s.cpu.ServiceMs)
		h.logf("clientvectors: %-27s server %6.1f/s p50 %6.2fms p99 %6.2fms cpu %.2fms/op (serve %.3f) | client %6.1f/s p50 %6.2fms p99 %6.2fms cpu %.2fms/op (serve %.3f) | client/server ops %.2f cpu %.2f serve %.2f | load %s",
			r.Name, r.Server.Throughput, r.Server.Latency.P50, r.Server.Latency.P99, r.ServerCPU.TotalMs(), r.ServerCPU.ServiceMs,
			r.Client.Throughput, r.Client.Latency.P50, r.Client.Latency.P99, r.ClientCPU.TotalMs(), r.ClientCPU.ServiceMs, r.Throughput, r.CPU, r.ServeCPU, loadAvg())
		for _, st := range []RunStats{s.stats, c.stats} {
			if st.Errors > 0 {
				failed = append(failed, fmt.Sprintf("%s: %d failed requests (%s)", r.Name, st.Errors, st.FirstError))
			}
		}
	}
	if len(failed) > 0 {
		return rows, fmt.Errorf("%v", failed)
	}
	return rows, nil
}
