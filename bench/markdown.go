package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// markdown renders the report as the tables of bench/results/latest.md
// (and of docs/performance.md, which quotes them).
func markdown(rep *Report) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Engram benchmark — %s mode\n\n", rep.Mode)
	p("Run %s, %.0f s. Machine: %d x %s, %d GiB RAM, Linux %s, %s; %s. Load average %s at start, %s at end.\n\n",
		rep.StartedAt.Format("2006-01-02 15:04 UTC"), rep.DurationSec, rep.Machine.Cores, rep.Machine.CPU, rep.Machine.MemoryGiB,
		rep.Machine.Kernel, rep.Machine.Go, rep.Machine.Postgres, rep.Machine.LoadAvgStart, rep.Machine.LoadAvgEnd)
	if s := rep.Service; s != nil {
		serviceMarkdown(p, rep.Scale, s)
		citusMarkdown(p, rep.Scale, s)
	}
	if f := rep.Filters; f != nil {
		filtersMarkdown(p, f)
	}
	if c := rep.ClientVectors; c != nil {
		clientVectorsMarkdown(p, c)
	}
	if c := rep.Conversation; c != nil {
		conversationMarkdown(p, rep.Scale, c)
	}
	if j := rep.Jobs; j != nil {
		jobsMarkdown(p, j)
	}
	if o := rep.Operator; o != nil {
		operatorMarkdown(p, o)
	}
	if sec := rep.Secrets; sec != nil {
		secretsMarkdown(p, sec)
	}
	if t := rep.Transfer; t != nil {
		transferMarkdown(p, t)
	}
	if r := rep.Rerank; r != nil {
		rerankMarkdown(p, r)
	}
	if r := rep.Reembed; r != nil {
		reembedMarkdown(p, r)
	}
	if m := rep.Move; m != nil {
		moveMarkdown(p, m)
	}
	if len(rep.Targets) > 0 {
		p("## Targets\n\n| target | goal | measured | met | note |\n|---|---|---|---|---|\n")
		for _, t := range rep.Targets {
			p("| %s | %s | %s | %s | %s |\n", t.Name, t.Goal, t.Measured, yesNo(t.Met), t.Note)
		}
		if rep.LargestGap != "" {
			p("\n**Largest gap:** %s.\n", rep.LargestGap)
		} else {
			p("\nEvery target measured in this run was met.\n")
		}
		p("\n")
	}
	if len(rep.Errors) > 0 {
		p("## Errors\n\n")
		for _, e := range rep.Errors {
			p("- %s\n", e)
		}
	}
	return b.String()
}

type printer func(format string, args ...any)

func serviceMarkdown(p printer, sc Scale, s *ServiceReport) {
	p("## Memory service (HTTP API of `manager serve`) vs raw SQL through pgx\n\n")
	p("%d memories: %d owners x %d, plus owners with %s memories; builtin 384-d embeddings; table %.0f MiB with indexes. "+
		"Each cell: %s per side, service and raw alternating in %d slices.\n\n",
		s.Memories, s.Owners, s.PerOwner, strings.Trim(fmt.Sprint(s.SmallOwners), "[]"), s.TableMiB, sc.RunDuration, sc.Rounds)
	p("Load through the batch API (%d items a request, %d in parallel): %d memories in %.1f s = **%.0f memories/s** (dedup actions %s).\n\n",
		s.Load.BatchSize, s.Load.Concurrency, s.Load.Items, s.Load.ElapsedSec, s.Load.ItemsPerSec, sortedMap(s.Load.Actions))
	p("| workload | c | service ops/s | serve CPU ms/op | harness CPU ms/op | p50 ms | p95 ms | p99 ms | raw ops/s | raw p50 ms | raw p99 ms | service/raw | ceiling ops/s | service/ceiling | pgbench tps | raw/pgbench | rows updated | new sessions |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, w := range s.Workloads {
		ceiling, cratio, pgb, pratio := "-", "-", "-", "-"
		if w.Ceiling != nil {
			ceiling, cratio = fmt.Sprintf("%.0f", w.Ceiling.Throughput), fmt.Sprintf("**%.2f**", w.CeilingRatio)
		}
		if w.Pgbench != nil {
			pgb, pratio = fmt.Sprintf("%.0f", w.Pgbench.TPS), fmt.Sprintf("%.2f", w.Pgbench.RawRatio)
		}
		serve, harness := cpuCols(w.ServiceCPU)
		p("| %s | %d | %.0f | %s | %s | %.2f | %.2f | %.2f | %.0f | %.2f | %.2f | **%.2f** | %s | %s | %s | %s | %d | %d |\n", w.Name, w.Concurrency,
			w.Service.Throughput, serve, harness, w.Service.Latency.P50, w.Service.Latency.P95, w.Service.Latency.P99,
			w.Raw.Throughput, w.Raw.Latency.P50, w.Raw.Latency.P99, w.Ratio, ceiling, cratio, pgb, pratio, w.RowUpdates, w.NewSessions)
	}
	cpuMarkdown(p, s.Workloads)
	for _, w := range s.Workloads {
		if w.CeilingPgbench != nil && w.Ceiling != nil {
			p("\nCeiling query with pgbench (%s c=%d, same statement, right after the cell): %.0f tps; the harness's ceiling %.0f ops/s = %.2f of it.\n",
				w.Name, w.Concurrency, w.CeilingPgbench.TPS, w.Ceiling.Throughput, w.CeilingPgbench.RawRatio)
		}
	}
	if c := s.SettledCeiling; c != nil && s.SettledPerOp != nil {
		p("\nCeiling on the freshly vacuumed table (before any search wrote access statistics), c=1: **%.0f ops/s**, p99 %.2f ms; per op %.1f heap rows fetched, %.1f heap pages.\n",
			c.Throughput, c.Latency.P99, s.SettledPerOp.HeapFetches, s.SettledPerOp.HeapPages)
	}
	p("\nPer operation (a sequential probe of %d operations of each side alone, after the c=1 cell; memories table counters): rows updated / heap rows fetched / heap pages touched.\n\n", probeOps)
	p("| workload | service | raw | ceiling |\n|---|---|---|---|\n")
	for _, w := range s.Workloads {
		if w.PerOp == nil {
			continue
		}
		cell := func(side string) string {
			o, ok := w.PerOp[side]
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%.1f / %.1f / %.1f", o.RowsUpdated, o.HeapFetches, o.HeapPages)
		}
		p("| %s | %s | %s | %s |\n", w.Name, cell("service"), cell("raw"), cell("ceiling"))
	}
	for _, w := range s.Workloads {
		if w.Service.Errors+w.Raw.Errors > 0 {
			p("\n%s c=%d: %d service errors (%s), %d raw errors (%s)", w.Name, w.Concurrency, w.Service.Errors, w.Service.FirstError, w.Raw.Errors, w.Raw.FirstError)
		}
	}
	q := s.Quality
	p("\nQuality: recall@10 of vector search against brute force **%.4f** (worst query %.2f, %d queries); owners with fewer than 10 memories get all of them: **%s**.",
		q.RecallAt10, q.MinRecall, q.Queries, yesNo(q.SmallOwnersComplete))
	p(" Dedup actions of the add workload: %s. `manager serve` peak RSS %.0f MiB.\n\n", sortedMap(s.AddActions), s.ServicePeakRSSMiB)
}

func conversationMarkdown(p printer, sc Scale, c *ConversationReport) {
	p("## Conversation memory (HTTP API of `manager serve`) vs raw SQL through pgx\n\n")
	p("One session of %d messages appended through the API in turns of %d (%.1f s), then compacted fully without an LLM in %.1f s",
		c.Messages, c.SeedTurn, c.SeedSec, c.CompactSec)
	if k := c.Compaction; k != nil {
		p(" (%d leaves, %d condensed, %d messages summarized, %s)", k.LeavesCreated, k.CondensedCreated, k.MessagesSummarized, k.Method)
	}
	p(". Appends: a turn of 2 messages, each worker to its own session. Windows: budget %d tokens of that session. "+
		"Each cell: %s per side, service and raw alternating in %d slices.\n\n", convBudget, sc.RunDuration, sc.Rounds)
	p("| workload | c | service ops/s | serve CPU ms/op | harness CPU ms/op | p50 ms | p95 ms | p99 ms | raw ops/s | raw p50 ms | raw p99 ms | service/raw | pgbench tps | raw/pgbench |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, w := range c.Workloads {
		serve, harness := cpuCols(w.ServiceCPU)
		pgb, pratio := "-", "-"
		if w.Pgbench != nil {
			pgb, pratio = fmt.Sprintf("%.0f", w.Pgbench.TPS), fmt.Sprintf("%.2f", w.Pgbench.RawRatio)
		}
		p("| %s | %d | %.0f | %s | %s | %.2f | %.2f | %.2f | %.0f | %.2f | %.2f | **%.2f** | %s | %s |\n", w.Name, w.Concurrency,
			w.Service.Throughput, serve, harness, w.Service.Latency.P50, w.Service.Latency.P95, w.Service.Latency.P99,
			w.Raw.Throughput, w.Raw.Latency.P50, w.Raw.Latency.P99, w.Ratio, pgb, pratio)
	}
	cpuMarkdown(p, c.Workloads)
}

func jobsMarkdown(p printer, j *JobsReport) {
	p("## Maintenance jobs (engine RunJob, as `manager job` runs it)\n\n")
	p("%d memories of %d owners (%.0f MiB), seeded in %.0f s by %s. Planted: %d inactive for 60 days, %d expired, %d decayed, %d duplicates.\n\n",
		j.Rows, j.Owners, j.TableMiB, j.SeedSec, j.SeedMethod, j.Planted.Inactive, j.Planted.Expired, j.Planted.Decayed, j.Planted.Duplicates)
	p("| operation | duty | scanned | affected | planted | batches | wall s | paused s | affected rows/s | scanned rows/s | add p99 alone ms | add p99 during ms | during / alone | adds during (errors) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, o := range j.Operations {
		alone, during, factor, n := "-", "-", "-", "-"
		if o.AddAlone != nil && o.AddDuring != nil {
			alone, during = fmt.Sprintf("%.2f", o.AddAlone.Latency.P99), fmt.Sprintf("%.2f", o.AddDuring.Latency.P99)
			factor, n = fmt.Sprintf("**%.2fx**", o.AddP99Factor), fmt.Sprintf("%d (%d)", o.AddDuring.Ops, o.AddAlone.Errors+o.AddDuring.Errors)
		}
		p("| %s | %.2f | %d | %d | %d | %d | %.2f | %.2f | %.0f | %.0f | %s | %s | %s | %s |\n", o.Name, o.Duty, o.Scanned, o.Affected, o.Expected, o.Batches, o.WallSec,
			o.PausedSec, o.AffectedPerSec, o.ScannedPerSec, alone, during, factor, n)
	}
	p("\nAdd p99 columns: engine adds (Store.Add, %d in parallel) alone right before each job, then while it runs; during / alone is the ratio of their p99 (goal <= 1.5x). Duty: the job's JobOptions.Duty (`manager job --duty`; 1 = unpaced), each duty on a freshly seeded tenant. Batch size %d (0: the default, 1000).\n", j.AddConcurrency, j.BatchSize)
	p("\nEngine adds (%d in parallel) without purge: %.0f/s, p50 %.2f ms, p99 **%.2f ms**; while the purge runs: %.0f/s, p50 %.2f ms, p99 **%.2f ms** (%.1fx, max %.1f ms, %d adds).\n\n",
		j.AddConcurrency, j.AddWithoutPurge.Throughput, j.AddWithoutPurge.Latency.P50, j.AddWithoutPurge.Latency.P99,
		j.AddDuringPurge.Throughput, j.AddDuringPurge.Latency.P50, j.AddDuringPurge.Latency.P99, j.P99Factor,
		j.AddDuringPurge.Latency.Max, j.AddDuringPurge.Ops)
}

func operatorMarkdown(p printer, o *OperatorReport) {
	p("## Operator (envtest kube-apiserver + etcd, real PostgreSQL)\n\n")
	p("%s. The harness stands in for the deployment controller (envtest has none): it marks each Deployment's rollout complete (%d status patches).\n\n",
		o.Process, o.DeploymentStatusPatches)
	p("| measure | value |\n|---|---|\n")
	p("| MemoryRuntimes (namespaces) | %d (%d) |\n", o.Runtimes, o.Namespaces)
	p("| created in | %.1f s |\n", o.CreateSec)
	p("| all Ready after (from the first create) | **%.1f s** (%d of %d Ready) |\n", o.ReadySec, o.Ready, o.Runtimes)
	p("| per runtime, create to Ready | p50 %.1f s, p95 %.1f s, max %.1f s |\n", o.ReadyLatency.P50/1000, o.ReadyLatency.P95/1000, o.ReadyLatency.Max/1000)
	p("| Ready at each 10-s look | %s |\n", joinInts(o.ReadyTimeline))
	p("| operator CPU from the first create to the last Ready | %.1f s (%.1f ms per reconcile) |\n", o.OperatorCPUSec, o.CPUPerReconcileMs)
	p("| provisionings until all Ready, mean time in PostgreSQL | %d, %.0f ms |\n", o.Provisionings, o.ProvisionMeanMs)
	p("| database sessions at most (bound) | %d (%s) |\n", o.PeakDBConnections, o.DBConnectionBound)
	p("| reconciles per runtime (at Ready / at the end) | %.1f / %.1f %s |\n", o.ReconcilesPerRuntimeAtReady, o.ReconcilesPerRuntime, sortedMap(o.ReconcilesByResult))
	p("| settle after Ready | %.0f s, %d operator writes |\n", o.SettleSec, o.SettleWrites)
	p("| operator writes in %.0f s idle | **%d** %s (reconciles %d) |\n", o.IdleWindowSec, o.IdleWrites, sortedMap(o.IdleWritesByMethod), o.IdleReconciles)
	if len(o.IdleWriteDetails) > 0 {
		p("| the operator's idle writes (audit log) | %s |\n", strings.Join(o.IdleWriteDetails, "; "))
	}
	p("| API server writes in the idle window, all clients | %d %s |\n", o.IdleAPIServerWritesAll, sortedMap(o.IdleAPIServerWrites))
	p("| operator peak RSS (VmHWM) / RSS at the end | **%.0f MiB** / %.0f MiB |\n\n", o.ManagerPeakRSSMiB, o.ManagerRSSMiB)
}

func joinInts(xs []int) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.Itoa(x)
	}
	return strings.Join(out, ", ")
}

func sortedMap(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
