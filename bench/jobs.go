package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// JobsReport is the maintenance jobs part of the results.
type JobsReport struct {
	Rows       int     `json:"rows"`
	Owners     int     `json:"owners"`
	SeedMethod string  `json:"seedMethod"`
	SeedSec    float64 `json:"seedSec"`
	TableMiB   float64 `json:"tableMiB"`
	Planted    Planted `json:"planted"`
	// Duties are the duty cycles measured, a seeded tenant each, in
	// order; Operations holds every pass's operations (JobOp.Duty).
	Duties     []float64 `json:"duties"`
	Operations []JobOp   `json:"operations"`
	// AddWithoutPurge and AddDuringPurge are engine adds (Store.Add,
	// in-process) at AddConcurrency, before and while the purge runs: the
	// purge's row of Operations at the first duty, kept here for earlier
	// readers.
	AddConcurrency int `json:"addConcurrency"`
	// BatchSize is JobOptions.BatchSize of every job (0: the default, 1000).
	BatchSize       int      `json:"batchSize"`
	AddWithoutPurge RunStats `json:"addWithoutPurge"`
	AddDuringPurge  RunStats `json:"addDuringPurge"`
	// P99Factor is the add p99 during purge / without purge.
	P99Factor float64 `json:"p99Factor"`
}

// JobOp is one maintenance operation run through the engine's RunJob.
type JobOp struct {
	Name string `json:"name"`
	// Duty is the run's JobOptions.Duty (1: unpaced); PausedSec the time
	// its pauses between batches took (JobResult.Paused), part of WallSec.
	Duty           float64 `json:"duty"`
	PausedSec      float64 `json:"pausedSec"`
	Scanned        int64   `json:"scanned"`
	Affected       int64   `json:"affected"`
	Expected       int     `json:"expected"`
	Batches        int     `json:"batches"`
	WallSec        float64 `json:"wallSec"`
	ScannedPerSec  float64 `json:"scannedPerSec"`
	AffectedPerSec float64 `json:"affectedPerSec"`
	// AddAlone is engine adds measured alone right before the job;
	// AddDuring the same adds while the job runs (until it ends);
	// AddP99Factor is AddDuring's p99 / AddAlone's, the same run, the same
	// table (issue 32: at most 1.5). Nil for the jobs not measured so
	// (summarize, sessions: they have no work in this part).
	AddAlone     *RunStats `json:"addAlone,omitempty"`
	AddDuring    *RunStats `json:"addDuring,omitempty"`
	AddP99Factor float64   `json:"addP99Factor,omitempty"`
}

// jobsUnderLoad are the jobs measured with adds running beside them.
var jobsUnderLoad = map[string]bool{memory.OpDecay: true, memory.OpExpire: true, memory.OpPurge: true, memory.OpCompact: true}

const (
	jobsSchema        = "engram_bench_jobs"
	jobAddConcurrency = 2
)

// jobSession is what `manager job` sets on its sessions by default;
// benchAdminSession lets the admin's COPY seeding of a million rows run
// past it.
var (
	jobSession        = memory.SessionSettings{StatementTimeout: memory.DefaultJobStatementTimeout}
	benchAdminSession = memory.SessionSettings{StatementTimeout: time.Hour}
)

// runJobs runs one pass of the jobs (jobsPass, a tenant of its own) per
// duty cycle of h.jobDuties: decay, expire, purge and compact through the
// engine's RunJob (what `manager job` calls), with engine adds measured
// alone and while each job runs.
func (h *harness) runJobs(ctx context.Context) (*JobsReport, error) {
	sc := h.scale
	rep := &JobsReport{Rows: sc.JobRows, Owners: sc.JobRows / seedPerOwner, Planted: plantedFor(sc.JobRows),
		AddConcurrency: jobAddConcurrency, Duties: h.jobDuties, BatchSize: h.jobBatch,
		SeedMethod: "COPY through pgx (2 parallel streams), one history row per memory by INSERT ... SELECT, then VACUUM (ANALYZE)"}
	for i, duty := range h.jobDuties {
		if err := h.jobsPass(ctx, rep, duty, uint64(100*i)); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// jobsPass seeds a tenant with COPY and runs every operation on it at one
// duty cycle (JobOptions.Duty; 1 = unpaced).
func (h *harness) jobsPass(ctx context.Context, rep *JobsReport, duty float64, seed uint64) error {
	sc := h.scale
	db, loginURL, admin, done, err := h.adminTenant(ctx, "jobs", "jobs database", jobsSchema, 4, benchAdminSession)
	defer done()
	if err != nil {
		return err
	}
	h.logf("jobs: seeding %d memories (%d owners) with COPY, for duty %.2f", sc.JobRows, rep.Owners, duty)
	t0 := time.Now()
	if err := h.seed(ctx, admin, db.URL, jobsSchema, sc.JobRows); err != nil {
		return err
	}
	rep.SeedSec = round3(time.Since(t0).Seconds())
	rep.TableMiB, _ = tableMiB(ctx, admin, jobsSchema)
	h.logf("jobs: seeded in %.1fs, table %.0f MiB", rep.SeedSec, rep.TableMiB)

	pool, err := memory.NewPool(ctx, loginURL, 8, jobSession)
	if err != nil {
		return err
	}
	defer pool.Close()
	emb, err := memory.NewBuiltinEmbedder(benchDims)
	if err != nil {
		return err
	}
	store, err := memory.New(memory.Config{Pool: pool, Schema: jobsSchema, Policy: benchPolicy(), Embedder: emb})
	if err != nil {
		return err
	}
	defer store.Close()

	p := rep.Planted
	expected := map[string]int{memory.OpDecay: p.Decayed, memory.OpExpire: p.Expired, memory.OpPurge: p.Inactive, memory.OpCompact: p.Duplicates}
	opts := memory.JobOptions{Duty: duty, BatchSize: h.jobBatch}
	for i, op := range memory.Operations {
		var res JobOp
		if jobsUnderLoad[op] {
			res, err = h.jobUnderLoad(ctx, store, rep, op, opts, seed+uint64(10*i))
		} else {
			res, err = runOp(ctx, store, op, opts)
		}
		if err != nil {
			return err
		}
		res.Expected = expected[op]
		h.logf("jobs: %-7s duty %.2f scanned %8d affected %8d (planted %d) in %7.2fs (paused %.2fs) = %9.0f rows/s; load %s", op, duty, res.Scanned, res.Affected, res.Expected, res.WallSec, res.PausedSec, res.AffectedPerSec, loadAvg())
		if op == memory.OpPurge && res.AddAlone != nil && duty == rep.Duties[0] {
			rep.AddWithoutPurge, rep.AddDuringPurge, rep.P99Factor = *res.AddAlone, *res.AddDuring, res.AddP99Factor
		}
		rep.Operations = append(rep.Operations, res)
	}
	return nil
}

func runOp(ctx context.Context, store *memory.Store, op string, opts memory.JobOptions) (JobOp, error) {
	t0 := time.Now()
	r, err := store.RunJob(ctx, op, opts)
	wall := time.Since(t0)
	if err != nil {
		return JobOp{Name: op}, fmt.Errorf("job %s: %w", op, err)
	}
	return JobOp{Name: op, Duty: opts.Duty, PausedSec: round3(r.Paused.Seconds()), Scanned: r.Scanned, Affected: r.Affected, Batches: r.Batches, WallSec: round3(wall.Seconds()),
		ScannedPerSec: round3(float64(r.Scanned) / wall.Seconds()), AffectedPerSec: round3(float64(r.Affected) / wall.Seconds())}, nil
}

// jobUnderLoad measures engine adds alone (the baseline, right before the
// job), then runs the job while the same adds go on until it ends. seed
// keeps each job's adds apart.
func (h *harness) jobUnderLoad(ctx context.Context, store *memory.Store, rep *JobsReport, op string, opts memory.JobOptions, seed uint64) (JobOp, error) {
	sc := h.scale
	add := func(seed uint64) opFunc {
		rngs := make([]*rand.Rand, jobAddConcurrency)
		for i := range rngs {
			rngs[i] = rand.New(rand.NewPCG(seed, uint64(i)))
		}
		return func(ctx context.Context, w int) error {
			it := h.corpus.fresh(rngs[w])
			_, err := store.Add(ctx, memory.AddRequest{Owner: jobOwnerName(rngs[w].IntN(rep.Owners)), Content: it.Content,
				Category: it.Category, Importance: it.Importance})
			return err
		}
	}
	runLoad(ctx, jobAddConcurrency, time.Second, sc.JobAddMaxOps, add(seed+1)) // warm-up
	alone := runLoad(ctx, jobAddConcurrency, sc.JobAddDuration, sc.JobAddMaxOps, add(seed+2)).stats()

	type outcome struct {
		op  JobOp
		err error
	}
	done := make(chan outcome, 1)
	loadCtx, stopLoad := context.WithCancel(ctx)
	go func() {
		res, err := runOp(ctx, store, op, opts)
		stopLoad()
		done <- outcome{res, err}
	}()
	// Bounded by the job's end, by count and by a generous time limit.
	during := runLoad(loadCtx, jobAddConcurrency, 30*time.Minute, sc.JobAddMaxOps*20, add(seed+3)).stats()
	res := <-done
	stopLoad()
	res.op.AddAlone, res.op.AddDuring = &alone, &during
	if during.Ops > 0 {
		res.op.AddP99Factor = ratio(during.Latency.P99, alone.Latency.P99)
	}
	if n := alone.Errors + during.Errors; n > 0 {
		// Counted in the report (errors of each RunStats), not fatal: the
		// job's own figures still hold.
		h.logf("jobs: %s: %d engine adds failed (alone: %s; during: %s)", op, n, alone.FirstError, during.FirstError)
	}
	h.logf("jobs: %-7s add p99 %.2fms alone, %.2fms during the job (%.2fx, %d adds)", op, alone.Latency.P99, during.Latency.P99, res.op.AddP99Factor, during.Ops)
	return res.op, res.err
}

// parseDuties reads --job-duty: 1 to 4 duty cycles within (0, 1].
func parseDuties(list string) ([]float64, error) { return parseDutyList("--job-duty", list) }

// parseDutyList reads a flag of 1 to 4 duty cycles within (0, 1].
func parseDutyList(name, list string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(list, ",") {
		d, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || d <= 0 || d > 1 {
			return nil, fmt.Errorf("%s %q: each duty must be a number within (0, 1]", name, list)
		}
		out = append(out, d)
	}
	if len(out) > 4 {
		return nil, fmt.Errorf("%s %q: at most 4 duties (each seeds a tenant)", name, list)
	}
	return out, nil
}
