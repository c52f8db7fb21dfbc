package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/jobrun"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/tenant"
)

// The re-embed part (--parts=reembed, issue 29; not in the default parts:
// it seeds a tenant per duty and fills every row, minutes at 200k). Per
// duty of --reembed-duty, on a tenant of its own seeded with COPY like the
// jobs part (--reembed-rows, 0: the service part's size, 40k short and
// 200k full), it measures:
//
//   - Begin (the shadow columns and their partial indexes), then the
//     Job's own fill loop (jobrun.ReembedLoop: batches of 64, paced so the
//     fill works duty of the time) with the builtin embedder of another
//     size as the new embedder: first alone for a tenth of the rows (rows/s
//     and CPU per 1,000 rows of the database and this process, where the
//     fill and its embedder run), then the rest while vector searches and
//     adds run through `manager serve` (concurrency 1 each, side by side)
//     in slices, every third with the fill held: rows/s, and the load's
//     p99 filling ÷ held (issue 29's 1.5x);
//   - the switch once no row is left (with the load stopped), its
//     duration, and recall@10 of vector search through a service of the new
//     embedder against brute force over the switched vectors, which must
//     be the new embedder's own vectors of each row's text.

// ReembedReport is the re-embed part of the results.
type ReembedReport struct {
	Memories int    `json:"memories"`
	From     string `json:"from"`
	To       string `json:"to"`
	Batch    int    `json:"batch"`
	// Passes are the duties measured, a seeded tenant each.
	Passes []ReembedPass `json:"passes"`
}

// ReembedPass is one duty's tenant from seed to switch.
type ReembedPass struct {
	Duty float64 `json:"duty"`
	// Pace is jobrun.ReembedLoop.Pace (manager job --reembed-pace) of Duty.
	Pace    float64 `json:"pace"`
	SeedSec float64 `json:"seedSec"`
	// TableMiBBefore and TableMiBAfter are the memories table with its
	// indexes after the seed and after the switch.
	TableMiBBefore float64 `json:"tableMiBBefore"`
	TableMiBAfter  float64 `json:"tableMiBAfter"`
	// AloneRowUpdates and AloneHotUpdates are the memories table's row
	// updates over the fill alone, and how many of them were HOT.
	AloneRowUpdates int64   `json:"aloneRowUpdates"`
	AloneHotUpdates int64   `json:"aloneHotUpdates"`
	BeginSec        float64 `json:"beginSec"`
	// Alone is the fill with nothing else running; CPUPer1000 its CPU
	// seconds per 1,000 rows filled.
	Alone      ReembedFill `json:"alone"`
	CPUPer1000 ReembedCPU  `json:"cpuPer1000Rows"`
	// UnderLoad is the rest of the fill, with searches and adds running.
	UnderLoad ReembedFill `json:"underLoad"`
	// NetCPUPer1000 is UnderLoad's CPU per 1,000 rows less what the load
	// itself cost per operation alone (an estimate).
	NetCPUPer1000 ReembedCPU `json:"netCpuPer1000RowsUnderLoad"`
	// Searches and adds through the service alone (before Begin) and
	// during the fill under load.
	SearchAlone  RunStats `json:"searchAlone"`
	SearchDuring RunStats `json:"searchDuring"`
	AddAlone     RunStats `json:"addAlone"`
	AddDuring    RunStats `json:"addDuring"`
	// SearchP99Factor and AddP99Factor are p99 during the fill ÷ alone.
	SearchP99Factor float64 `json:"searchP99Factor"`
	AddP99Factor    float64 `json:"addP99Factor"`
	SwitchSec       float64 `json:"switchSec"`
	SwitchTries     int     `json:"switchTries"`
	// Recall is vector search under the new embedder after the switch.
	RecallQueries int     `json:"recallQueries"`
	Recall        float64 `json:"recallAt10"`
	MinRecall     float64 `json:"minRecall"`
	// VectorsChecked rows of the recall's owners were compared with the
	// new embedder's vector of their text; VectorsWrong differed.
	VectorsChecked int    `json:"vectorsChecked"`
	VectorsWrong   int    `json:"vectorsWrong"`
	LoadAvg        string `json:"loadAvg"`
}

// ReembedFill is one stretch of the fill.
type ReembedFill struct {
	Rows    int64   `json:"rows"`
	Batches int64   `json:"batches"`
	Sec     float64 `json:"sec"`
	RowsSec float64 `json:"rowsPerSec"`
}

// ReembedCPU is CPU seconds by process.
type ReembedCPU struct {
	DatabaseSec float64 `json:"databaseSec"`
	HarnessSec  float64 `json:"harnessSec"` // the fill loop and its embedder (and, under load, the load's clients)
	ServiceSec  float64 `json:"serviceSec"`
}

const (
	// reembedToDims is the new embedder's size: the builtin embedder of
	// 256 dimensions is another model of the same provider.
	reembedToDims = 256
	// reembedAloneShare is the share of the rows filled alone.
	reembedAloneShare = 10
	// reembedBound bounds every wait of a pass (the fill under load, the
	// loads beside it).
	reembedBound     = 45 * time.Minute
	reembedSwitchMax = 50
	// reembedSlice is one slice of the load beside the fill: filling, or
	// held (every third) for the load's "alone".
	reembedSlice = 2 * time.Second
)

// paceForDuty is the loop's pause per batch duration that fills duty of
// the time: a batch of t is followed by a pause of t(1/duty - 1).
func paceForDuty(duty float64) float64 {
	if duty <= 0 || duty >= 1 {
		return 0
	}
	return round3(1/duty - 1)
}

// reembedPart holds the re-embed part's steps (the harness has enough
// methods of its own).
type reembedPart struct{ *harness }

func (h *reembedPart) run(ctx context.Context) (*ReembedReport, error) {
	from := memory.ReembedNamed(memory.ProviderBuiltin, "", benchDims)
	to := memory.ReembedNamed(memory.ProviderBuiltin, "", reembedToDims)
	rep := &ReembedReport{Memories: h.reembedRows, From: from.String(), To: to.String(), Batch: jobrun.DefaultReembedBatch}
	for i, duty := range h.reembedDuties {
		pass, err := h.reembedPass(ctx, from, to, duty, uint64(1000+100*i))
		rep.Passes = append(rep.Passes, pass)
		if err != nil {
			return rep, fmt.Errorf("duty %.2f: %w", duty, err)
		}
	}
	return rep, nil
}

// reembedTenant is what a pass works on.
type reembedTenant struct {
	db       *benchDB
	loginURL string
	svc      *benchService
	owners   int
	target   memory.ReembedTarget
}

func (h *reembedPart) reembedPass(ctx context.Context, from, to memory.ReembedEmbedder, duty float64, seed uint64) (ReembedPass, error) {
	pass := ReembedPass{Duty: duty, Pace: paceForDuty(duty)}
	db, loginURL, admin, done, err := h.adminTenant(ctx, "reembed", "re-embed database", benchSchema, 2, benchAdminSession)
	defer done()
	if err != nil {
		return pass, err
	}
	h.logf("reembed: seeding %d memories with COPY, for duty %.2f", h.reembedRows, duty)
	t0 := time.Now()
	if err := h.seed(ctx, admin, db.URL, benchSchema, h.reembedRows); err != nil {
		return pass, err
	}
	pass.SeedSec = round3(time.Since(t0).Seconds())
	pass.TableMiBBefore, _ = tableMiB(ctx, admin, benchSchema)
	svc, err := h.startService(ctx, "reembed-from", loginURL, benchPolicy(), false)
	if err != nil {
		return pass, err
	}
	defer func() { svc.stop() }()
	rt := reembedTenant{db: db, loginURL: loginURL, svc: svc, owners: h.reembedRows / seedPerOwner,
		target: memory.ReembedTarget{Schema: benchSchema, Owner: tenant.OwnerRole(benchSchema), Login: tenant.LoginRole(benchSchema),
			LockTimeout: memory.DefaultLockTimeout, StatementTimeout: memory.DefaultJobStatementTimeout}}
	meter := cpuMeter{servicePID: svc.proc.pid(), database: db.name}

	loads := h.reembedLoads(rt, seed)
	runPair(ctx, loads, time.Second, h.scale.JobAddMaxOps) // warm-up

	t0 = time.Now()
	if err := memory.ReembedBegin(ctx, admin, rt.target, from, to); err != nil {
		return pass, err
	}
	pass.BeginSec = round3(time.Since(t0).Seconds())
	jobPool, err := memory.NewPool(ctx, loginURL, 2, memory.SessionSettings{LockTimeout: memory.DefaultLockTimeout, StatementTimeout: memory.DefaultJobStatementTimeout})
	if err != nil {
		return pass, err
	}
	defer jobPool.Close()
	emb, err := memory.NewBuiltinEmbedder(to.Dimensions)
	if err != nil {
		return pass, err
	}
	newLoop := func(f *countingFiller, maxRun time.Duration) jobrun.ReembedLoop {
		f.inner = memory.NewReembedFiller(jobPool, rt.target, to, emb)
		return jobrun.ReembedLoop{Filler: f, Batch: jobrun.DefaultReembedBatch, Pace: pass.Pace, MaxRun: maxRun, UnreachableAfter: time.Minute}
	}

	// The fill alone, for a tenth of the rows: the filler ends the loop.
	fa := newCountingFiller(int64(h.reembedRows / reembedAloneShare))
	ioBefore, ioErr := readTableIO(ctx, admin, benchSchema)
	before := meter.read()
	t0 = time.Now()
	if _, err := newLoop(fa, 10*time.Minute).Run(ctx); err != nil {
		return pass, fmt.Errorf("the fill alone: %w", err)
	}
	pass.Alone = fa.fill(time.Since(t0))
	c := meter.read().since(before, 0)
	pass.CPUPer1000 = perThousand(c, pass.Alone.Rows)
	if ioAfter, err := readTableIO(ctx, admin, benchSchema); err == nil && ioErr == nil {
		d := ioAfter.minus(ioBefore)
		pass.AloneRowUpdates, pass.AloneHotUpdates = d.updates, d.hot
	}
	h.logf("reembed: duty %.2f alone: %d rows in %.2fs = %.0f rows/s (%d row updates, %d HOT); CPU per 1,000 rows: database %.3fs, harness %.3fs; load %s",
		duty, pass.Alone.Rows, pass.Alone.Sec, pass.Alone.RowsSec, pass.AloneRowUpdates, pass.AloneHotUpdates,
		pass.CPUPer1000.DatabaseSec, pass.CPUPer1000.HarnessSec, loadAvg())

	loopCtx, stopLoop := context.WithCancel(ctx) // ends the loop if the pass fails before the switch
	defer stopLoop()
	ended, err := h.fillUnderLoad(loopCtx, &pass, newLoop, loads, meter)
	if err != nil {
		return pass, err
	}
	if err := h.switchReembed(ctx, &pass, admin, rt.target, to, ended); err != nil {
		return pass, err
	}
	svc.stop()
	pass.TableMiBAfter, _ = tableMiB(ctx, admin, benchSchema)
	pass.LoadAvg = loadAvg()
	return pass, h.recallAfterSwitch(ctx, &pass, rt, emb)
}

// fillUnderLoad runs the rest of the fill (the loop keeps running after:
// the switch ends it) with the searches and adds running in slices, until
// no row is left: every third slice holds the fill (the filler fills
// nothing, once its batch in flight is done), so the load's "alone" is
// measured in the same run, on the same table, amid the same noise of a
// shared machine as "during" (issue 32: ratios in the same run).
func (h *reembedPart) fillUnderLoad(ctx context.Context, pass *ReembedPass, newLoop func(*countingFiller, time.Duration) jobrun.ReembedLoop,
	loads [2]opFunc, meter cpuMeter) (<-chan error, error) {
	fb := newCountingFiller(0)
	loop := newLoop(fb, reembedBound)
	ended := make(chan error, 1)
	go func() {
		_, err := loop.Run(ctx) // ctx: the pass's; the switch ends the loop
		ended <- err
	}()
	var alone, during [2]sample
	var aloneCPU, duringCPU cpuTotals
	var onTime time.Duration
	caught := false
	for i := 0; i < int(reembedBound/reembedSlice) && !caught; i++ {
		held := i%3 == 0
		if held {
			if err := fb.hold(ctx); err != nil {
				return nil, err
			}
		} else {
			fb.release()
		}
		before, t0 := meter.read(), time.Now()
		got := runPair(ctx, loads, reembedSlice, h.scale.JobAddMaxOps)
		c := meter.read().since(before, 0)
		select {
		case <-fb.caughtUp:
			caught = true
		case err := <-ended:
			return nil, fmt.Errorf("the fill ended before it caught up: %w", err)
		default:
		}
		if held {
			alone[0].merge(got[0])
			alone[1].merge(got[1])
			aloneCPU.add(c)
			continue
		}
		during[0].merge(got[0])
		during[1].merge(got[1])
		duringCPU.add(c)
		onTime += fb.onFor(t0, time.Now())
	}
	fb.release()
	if !caught {
		return nil, fmt.Errorf("the fill did not catch up within %s", reembedBound)
	}
	pass.UnderLoad = fb.fill(onTime)
	pass.SearchAlone, pass.AddAlone = alone[0].stats(), alone[1].stats()
	pass.SearchDuring, pass.AddDuring = during[0].stats(), during[1].stats()
	pass.SearchP99Factor = ratio(pass.SearchDuring.Latency.P99, pass.SearchAlone.Latency.P99)
	pass.AddP99Factor = ratio(pass.AddDuring.Latency.P99, pass.AddAlone.Latency.P99)
	pass.NetCPUPer1000 = perThousand(netOfLoad(duringCPU, aloneCPU, pass.SearchAlone.Ops+pass.AddAlone.Ops,
		pass.SearchDuring.Ops+pass.AddDuring.Ops), pass.UnderLoad.Rows)
	h.logf("reembed: duty %.2f under load: %d rows in %.2fs = %.0f rows/s; search p99 %.2fms held / %.2fms filling = %.2fx (%d / %d searches), "+
		"add p99 %.2f / %.2fms = %.2fx (%d / %d adds); net CPU per 1,000 rows: database %.3fs, harness %.3fs; load %s",
		pass.Duty, pass.UnderLoad.Rows, pass.UnderLoad.Sec, pass.UnderLoad.RowsSec,
		pass.SearchAlone.Latency.P99, pass.SearchDuring.Latency.P99, pass.SearchP99Factor, pass.SearchAlone.Ops, pass.SearchDuring.Ops,
		pass.AddAlone.Latency.P99, pass.AddDuring.Latency.P99, pass.AddP99Factor, pass.AddAlone.Ops, pass.AddDuring.Ops,
		pass.NetCPUPer1000.DatabaseSec, pass.NetCPUPer1000.HarnessSec, loadAvg())
	for _, st := range []RunStats{pass.SearchAlone, pass.AddAlone, pass.SearchDuring, pass.AddDuring} {
		if st.Errors > 0 {
			return nil, fmt.Errorf("%d requests failed beside the re-embed (%s)", st.Errors, st.FirstError)
		}
	}
	return ended, nil
}

// switchReembed switches once no row is left, as the operator does (a row
// an add wrote after the count is filled by the loop, which runs until the
// switch ends it), and waits for the loop to end.
func (h *reembedPart) switchReembed(ctx context.Context, pass *ReembedPass, admin *pgxpool.Pool, target memory.ReembedTarget, to memory.ReembedEmbedder,
	ended <-chan error) error {
	t0 := time.Now()
	var err error
	for pass.SwitchTries < reembedSwitchMax {
		pass.SwitchTries++
		if err = memory.ReembedSwitch(ctx, admin, target); !errors.Is(err, memory.ErrReembedRowsLeft) {
			break
		}
		if serr := memory.Sleep(ctx, 200*time.Millisecond); serr != nil {
			return serr
		}
	}
	pass.SwitchSec = round3(time.Since(t0).Seconds())
	if err != nil {
		return fmt.Errorf("switching after %d tries: %w", pass.SwitchTries, err)
	}
	select {
	case lerr := <-ended:
		if lerr != nil {
			return fmt.Errorf("the fill loop after the switch: %w", lerr)
		}
	case <-time.After(time.Minute):
		return errors.New("the fill loop did not end within a minute of the switch")
	}
	p, err := memory.ReadReembedProgress(ctx, admin, target)
	if err != nil {
		return err
	}
	if p.Current != to || p.Phase == memory.ReembedPhaseFilling {
		return fmt.Errorf("after the switch the tenant's vectors are %s's (phase %s), want %s's", p.Current, p.Phase, to)
	}
	h.logf("reembed: duty %.2f switched in %.2fs (%d tries); load %s", pass.Duty, pass.SwitchSec, pass.SwitchTries, loadAvg())
	return nil
}

// reembedLoads are the vector searches and the adds (fresh texts) through
// the service, each at concurrency 1.
func (h *reembedPart) reembedLoads(rt reembedTenant, seed uint64) [2]opFunc {
	rs := rand.New(rand.NewPCG(seed, 1))
	ra := rand.New(rand.NewPCG(seed, 2))
	search := func(ctx context.Context, _ int) error {
		owner := jobOwnerName(rs.IntN(rt.owners))
		var res apiSearchResult
		err := rt.svc.api.post(ctx, ownerPath(owner, "/search"), map[string]any{"query": h.corpus.query(rs, owner, rs.IntN(seedPerOwner)),
			"mode": "vector", "topK": topK}, &res)
		if err != nil {
			return err
		}
		return expectRows(len(res.Results), topK)
	}
	add := func(ctx context.Context, _ int) error {
		var res apiAddResult
		return rt.svc.api.post(ctx, ownerPath(jobOwnerName(ra.IntN(rt.owners)), "/memories"), h.corpus.fresh(ra), &res)
	}
	return [2]opFunc{search, add}
}

// runPair runs both loads side by side, each at concurrency 1.
func runPair(ctx context.Context, loads [2]opFunc, dur time.Duration, maxOps int) [2]sample {
	var out [2]sample
	var wg sync.WaitGroup
	for i, op := range loads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = runLoad(ctx, 1, dur, maxOps, op)
		}()
	}
	wg.Wait()
	return out
}
