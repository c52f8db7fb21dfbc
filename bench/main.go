// Command bench is Engram's benchmark harness (make bench, make bench-full).
// It measures, in one run on one machine:
//
//   - the memory service through its HTTP API (the real `manager serve`
//     binary) against the raw SQL ceiling of the same work through pgx,
//     and, with CITUS_URL, the same service on a tenant of a Citus
//     coordinator beside it;
//   - conversation memory the same way: appends, and windows of a
//     10,000-message session;
//   - the maintenance jobs on a bulk-loaded tenant;
//   - the operator (the real `manager` binary) on an envtest control plane;
//   - export and import (transfer.go): a tenant of the service part's size
//     exported through GET /v1/export and imported into another;
//   - filtered search (filters.go): recall against the exact answer over
//     what a filter keeps, and latency beside unfiltered search;
//   - client vectors (clientvectors.go): add and search with the client's
//     own `embedding` and `vector` beside the same requests embedded by
//     the service, and recall of client-vector search against brute force;
//   - the overhead of reranking (rerank.go): hybrid search with and without
//     a reranker, against a fake /rerank server that answers at once;
//   - on request (--parts=secrets), the operator's memory with 1,000
//     unrelated Secrets in the cluster;
//   - on request (--parts=reembed, reembed.go: minutes at 200k), the
//     re-embed Job's fill after a model change: rows/s, CPU per 1,000
//     rows, search p99 during the fill ÷ alone, the switch, and recall
//     under the new embedder;
//   - on request (--parts=move, move.go), a tenant moved to a second
//     server (tenant.Relocation) while writers and a reader work on it:
//     bulk copy, index rebuild, catch-up passes, the freeze in ms, the
//     writes refused in it and the acknowledged writes lost (must be 0).
//
// It needs DATABASE_URL (hack/pgvector.sh start), for the operator part
// KUBEBUILDER_ASSETS (hack/envtest.sh), and for the Citus comparison of the
// service part CITUS_URL (hack/citus.sh start; without it that comparison is
// skipped and the report says so). Results go to bench/results/ as JSON
// (timestamped and latest.json) and a markdown table (latest.md);
// docs/performance.md explains the method.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// harness holds what every part of the benchmark shares.
type harness struct {
	scale      Scale
	serverURL  string // DATABASE_URL: an admin connection to PostgreSQL with pgvector
	citusURL   string // CITUS_URL: a Citus coordinator's admin URL ("": no Citus comparison)
	assets     string // KUBEBUILDER_ASSETS
	managerBin string
	workDir    string // logs and config files of this run
	corpus     *corpus
	start      time.Time
	keepDB     bool
	// operatorConcurrency is passed to the operator as
	// --max-concurrent-reconciles-runtime (0: its default).
	operatorConcurrency int
	// pprofDir, when set (--pprof), starts `manager serve` with a pprof
	// listener and saves CPU profiles of the vector search c=1 cell and of
	// each conversation c=1 cell there.
	pprofDir string
	// abManagerBin, when set (--ab-manager), is a second manager binary the
	// conversation part serves beside the first and measures in the same
	// slices (conversation_ab.go).
	abManagerBin string
	// jobDuties are the duty cycles the jobs part measures (--job-duty).
	jobDuties []float64
	// jobBatch is the jobs part's batch size (--job-batch; 0: the default).
	jobBatch int
	// reembedRows and reembedDuties size the reembed part (--reembed-rows,
	// --reembed-duty).
	reembedRows   int
	reembedDuties []float64
	// moveRows sizes the move part (--move-rows).
	moveRows int
}

func (h *harness) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(h.start).Seconds(), fmt.Sprintf(format, args...))
}

// dropDatabase drops a benchmark database unless --keep-db asks to keep it.
func (h *harness) dropDatabase(what string, db *benchDB) {
	if h.keepDB {
		h.logf("kept %s %s (roles %v)", what, db.name, db.roles)
		return
	}
	h.cleanup(what, db.drop)
}

// cleanup runs a teardown step and logs (does not hide) its failure.
func (h *harness) cleanup(what string, fn func() error) {
	if err := fn(); err != nil {
		h.logf("cleanup of %s failed: %v", what, err)
	}
}

type options struct {
	mode, parts, out, manager string
	pprof                     string
	abManager                 string
	jobDuty                   string
	reembedDuty               string
	reembedRows               int
	moveRows                  int
	jobBatch                  int
	runtimes, owners, jobRows int
	operatorConcurrency       int
	convMessages              int
	runDuration               time.Duration
	timeout, idle             time.Duration
	keepLogs, keepDB          bool
}

func parseOptions(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&o.mode, "mode", "short", "short (make bench, about 11 min) or full (make bench-full, the sizes of issue 7)")
	fs.StringVar(&o.parts, "parts", "service,filters,clientvectors,conversation,jobs,operator,transfer,rerank", "comma-separated parts to run (also: secrets, the operator's memory with 1,000 unrelated Secrets; reembed, the re-embed fill beside searches; move, a tenant moved to a second server under writes)")
	fs.StringVar(&o.out, "out", "bench/results", "directory of the results")
	fs.StringVar(&o.manager, "manager", "bin/manager", "the manager binary to benchmark (make bench builds it)")
	fs.IntVar(&o.runtimes, "runtimes", 0, "MemoryRuntimes of the operator part (0 = the mode's default: 200 short, 1,000 full; up to 5,000: make bench-full N=5000)")
	fs.IntVar(&o.operatorConcurrency, "operator-concurrency", 0, "the operator's --max-concurrent-reconciles-runtime (0 = its default)")
	fs.IntVar(&o.owners, "owners", 0, "large owners of the service part (0 = the mode's default)")
	fs.IntVar(&o.jobRows, "job-rows", 0, "memories of the jobs part (0 = the mode's default)")
	fs.IntVar(&o.jobBatch, "job-batch", 0, "batch size of the jobs part (JobOptions.BatchSize, manager job --batch-size; 0 = its default, 1000)")
	fs.StringVar(&o.jobDuty, "job-duty", "1,0.5", "comma-separated duty cycles of the jobs part (manager job --duty), a seeded tenant each: 1 is unpaced")
	fs.IntVar(&o.reembedRows, "reembed-rows", 0, "memories of the reembed part, a multiple of 1,000 (0 = the service part's size: 40,000 short, 200,000 full)")
	fs.StringVar(&o.reembedDuty, "reembed-duty", "1,0.5", "comma-separated duty cycles of the reembed part's fill (manager job --reembed-pace = 1/duty - 1), a seeded tenant each")
	fs.IntVar(&o.moveRows, "move-rows", 0, "memories of the move part, a multiple of 1,000 (0 = the service part's size: 40,000 short, 200,000 full)")
	fs.IntVar(&o.convMessages, "conv-messages", 0, "messages of the long session of the conversation part (0 = the mode's default, 10,000)")
	fs.DurationVar(&o.runDuration, "run-duration", 0, "measured time of one workload at one concurrency, per side (0 = the mode's default)")
	fs.DurationVar(&o.timeout, "timeout", 0, "stop everything after this long (0 = 25m short, 3h full)")
	fs.DurationVar(&o.idle, "idle-window", 0, "length of the operator's idle window (0 = 60s)")
	fs.StringVar(&o.pprof, "pprof", "", "directory to save CPU profiles of manager serve in: the vector search c=1 cell and each conversation c=1 cell (\"\" = none; the service then runs with --pprof-listen on 127.0.0.1)")
	fs.StringVar(&o.abManager, "ab-manager", "", "a second manager binary: the conversation part serves it beside --manager on the same tenant and measures it in the same alternating slices (service B in the log), to A/B a change (\"\" = none)")
	fs.BoolVar(&o.keepLogs, "keep-logs", false, "keep the logs and config files of the run")
	fs.BoolVar(&o.keepDB, "keep-db", false, "keep the benchmark databases and roles (to investigate plans afterwards; drop them by hand)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return o, nil
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	// The harness's own Kubernetes clients (envtest, watches) log warnings
	// and errors only; the operator under test logs to its own file.
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	o, err := parseOptions(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	h, err := newHarness(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	if !o.keepLogs {
		defer os.RemoveAll(h.workDir)
	}
	timeout := o.timeout
	if timeout == 0 {
		timeout = map[string]time.Duration{"short": 25 * time.Minute, "full": 3 * time.Hour}[o.mode]
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()

	rep := h.runParts(ctx, strings.Split(o.parts, ","))
	paths, err := writeResults(o.out, rep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	h.logf("results: %s", strings.Join(paths, ", "))
	if len(rep.Errors) > 0 {
		for _, e := range rep.Errors {
			fmt.Fprintln(os.Stderr, "bench: error:", e)
		}
		if o.keepLogs {
			h.logf("logs kept in %s", h.workDir)
		}
		return 1
	}
	return 0
}

// setIfGiven replaces a preset of the mode with a flag's value when the flag
// was given: 0, every size flag's default, keeps the preset.
func setIfGiven[T int | time.Duration](preset *T, flag T) {
	if flag > 0 {
		*preset = flag
	}
}

func newHarness(o *options) (*harness, error) {
	sc, err := scaleFor(o.mode)
	if err != nil {
		return nil, err
	}
	setIfGiven(&sc.Runtimes, o.runtimes)
	setIfGiven(&sc.Owners, o.owners)
	setIfGiven(&sc.JobRows, o.jobRows)
	setIfGiven(&sc.IdleWindow, o.idle)
	setIfGiven(&sc.ConvMessages, o.convMessages)
	setIfGiven(&sc.RunDuration, o.runDuration)
	if err := sc.validate(); err != nil {
		return nil, err
	}
	duties, err := parseDuties(o.jobDuty)
	if err != nil {
		return nil, err
	}
	rduties, err := parseDutyList("--reembed-duty", o.reembedDuty)
	if err != nil {
		return nil, err
	}
	rrows := sc.Owners * sc.PerOwner
	setIfGiven(&rrows, o.reembedRows)
	if rrows < 2000 || rrows%seedPerOwner != 0 || rrows > 2_000_000 {
		return nil, fmt.Errorf("--reembed-rows %d: must be a multiple of 1000 within 2000..2000000", rrows)
	}
	mrows := sc.Owners * sc.PerOwner
	setIfGiven(&mrows, o.moveRows)
	if mrows < 2000 || mrows%seedPerOwner != 0 || mrows > 2_000_000 {
		return nil, fmt.Errorf("--move-rows %d: must be a multiple of 1000 within 2000..2000000", mrows)
	}
	if o.jobBatch < 0 || o.jobBatch > 100_000 {
		return nil, fmt.Errorf("--job-batch %d: must be within 0..100000", o.jobBatch)
	}
	h := &harness{moveRows: mrows, reembedRows: rrows, reembedDuties: rduties, jobDuties: duties, jobBatch: o.jobBatch, scale: sc, serverURL: os.Getenv("DATABASE_URL"), citusURL: os.Getenv("CITUS_URL"), assets: os.Getenv("KUBEBUILDER_ASSETS"), corpus: newCorpus(), start: time.Now(), keepDB: o.keepDB, operatorConcurrency: o.operatorConcurrency, pprofDir: o.pprof}
	if h.serverURL == "" {
		return nil, errors.New("DATABASE_URL is not set: export DATABASE_URL=$(hack/pgvector.sh start)")
	}
	if h.managerBin, err = filepath.Abs(o.manager); err != nil {
		return nil, err
	}
	if _, err := os.Stat(h.managerBin); err != nil {
		return nil, fmt.Errorf("manager binary %s: %w (build it: make build, or let make bench do it)", h.managerBin, err)
	}
	if o.abManager != "" {
		if h.abManagerBin, err = filepath.Abs(o.abManager); err != nil {
			return nil, err
		}
		if _, err := os.Stat(h.abManagerBin); err != nil {
			return nil, fmt.Errorf("--ab-manager %s: %w", h.abManagerBin, err)
		}
	}
	if h.workDir, err = os.MkdirTemp("", "engram-bench-"); err != nil {
		return nil, err
	}
	return h, nil
}

// runParts runs the selected parts in order; a failing part is recorded and
// the others still run, so one broken part never hides the others' figures.
func (h *harness) runParts(ctx context.Context, parts []string) *Report {
	rep := &Report{Mode: h.scale.Mode, Scale: h.scale, StartedAt: time.Now().UTC(), Machine: machineInfo(ctx, h.serverURL)}
	h.logf("engram bench, mode %s: %s", h.scale.Mode, rep.Machine.summary())
	for _, part := range parts {
		part = strings.TrimSpace(part)
		if ctx.Err() != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: not run: %v", part, ctx.Err()))
			continue
		}
		var err error
		switch part {
		case "service":
			rep.Service, err = h.runService(ctx)
		case "conversation":
			rep.Conversation, err = h.runConversation(ctx)
		case "jobs":
			rep.Jobs, err = h.runJobs(ctx)
		case "operator":
			rep.Operator, err = h.runOperator(ctx)
		case "secrets":
			rep.Secrets, err = h.runSecrets(ctx)
		case "transfer":
			rep.Transfer, err = h.runTransfer(ctx)
		case "filters":
			rep.Filters, err = h.runFilters(ctx)
		case "clientvectors":
			rep.ClientVectors, err = h.runClientVectors(ctx)
		case "rerank":
			rep.Rerank, err = h.runRerank(ctx)
		case "reembed":
			rep.Reembed, err = (&reembedPart{h}).run(ctx)
		case "move":
			rep.Move, err = (&movePart{h}).run(ctx)
		default:
			err = fmt.Errorf("unknown part (want service, conversation, jobs, operator, secrets, transfer, filters, clientvectors, rerank, reembed or move)")
		}
		if err != nil {
			h.logf("%s: FAILED: %v", part, err)
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", part, err))
		}
	}
	rep.FinishedAt = time.Now().UTC()
	rep.DurationSec = round3(rep.FinishedAt.Sub(rep.StartedAt).Seconds())
	rep.Machine.LoadAvgEnd = loadAvg()
	rep.Targets = targets(rep)
	for _, t := range rep.Targets {
		if t.Check && !t.Met {
			rep.Errors = append(rep.Errors, fmt.Sprintf("check failed: %s: %s, want %s", t.Name, t.Measured, t.Goal))
		}
	}
	rep.Parts = slices.Clone(parts)
	return rep
}
