package main

import "strings"

// citusMarkdown renders the Citus comparison of the service part (or why
// it did not run).
func citusMarkdown(p printer, sc Scale, s *ServiceReport) {
	c := s.Citus
	if c == nil {
		if s.CitusNote != "" {
			p("## Memory service on Citus\n\n%s.\n\n", s.CitusNote)
		}
		return
	}
	p("## Memory service on Citus beside plain PostgreSQL\n\n")
	p("The same `manager serve` binary, policy and embedder on a tenant of a Citus %s coordinator (workers %s; the tenant's distributed schema on %s), "+
		"loaded like the plain tenant (%d memories in %.1f s = %.0f/s through the batch API; %d fresh ones added so each owner has as many active memories as on plain PostgreSQL: "+
		"%d active on Citus, %d on plain). Both services get the same requests (same seeds), in alternating slices of %s per side over %d slices. "+
		"**citus/plain** is the service's throughput on Citus / on plain PostgreSQL (higher is better, 1 = Citus costs nothing). "+
		"CPU ms per operation, from /proc: `manager serve` + the PostgreSQL backends of the tenant's database on every node (coordinator + workers on Citus); "+
		"background processes not counted. Citus nodes: %s.\n\n",
		c.Version, strings.Join(c.Workers, ", "), c.Worker, c.Load.Items, c.Load.ElapsedSec, c.Load.ItemsPerSec, c.TopUp,
		c.Memories, c.PlainMemories, sc.RunDuration, sc.Rounds, c.Settings)
	p("| workload | c | plain ops/s | plain p50 ms | plain p99 ms | Citus ops/s | Citus p50 ms | Citus p99 ms | citus/plain | plain CPU ms/op (service + db) | Citus CPU ms/op (service + coordinator + workers) |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, w := range c.Workloads {
		p("| %s | %d | %.0f | %.2f | %.2f | %.0f | %.2f | %.2f | **%.2f** | %.2f (%.2f + %.2f) | %.2f (%.2f + %.2f + %.2f) |\n", w.Name, w.Concurrency,
			w.Plain.Throughput, w.Plain.Latency.P50, w.Plain.Latency.P99, w.Citus.Throughput, w.Citus.Latency.P50, w.Citus.Latency.P99, w.Ratio,
			w.PlainCPU.TotalMs(), w.PlainCPU.ServiceMs, w.PlainCPU.DatabaseMs,
			w.CitusCPU.TotalMs(), w.CitusCPU.ServiceMs, w.CitusCPU.CoordinatorMs, w.CitusCPU.WorkersMs)
	}
	q := c.Quality
	p("\nQuality on Citus: recall@10 of vector search against brute force **%.4f** (worst query %.2f, %d queries); owners with fewer than 10 memories get all of them: **%s**.\n\n",
		q.RecallAt10, q.MinRecall, q.Queries, yesNo(q.SmallOwnersComplete))
}
