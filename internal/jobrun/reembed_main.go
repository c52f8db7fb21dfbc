package jobrun

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/workload"
)

// ReembedOptions are the --reembed-* flags: the embedder to fill with (its
// key comes from the environment, as the service's) and the loop's bounds.
type ReembedOptions struct {
	Provider, Model, Endpoint string
	Dimensions                int
	Batch                     int
	Pace                      float64
	MaxRun, UnreachableAfter  time.Duration
}

// Defaults of the re-embed loop (docs/configuration.md).
const (
	DefaultReembedBatch            = 64
	DefaultReembedPace             = 1.0
	DefaultReembedMaxRun           = 50 * time.Minute
	DefaultReembedUnreachableAfter = 5 * time.Minute
)

func reembedFlags(fs *flag.FlagSet, r *ReembedOptions) {
	fs.StringVar(&r.Provider, "reembed-provider", "", "reembed: provider of the new embedder (builtin or openai)")
	fs.StringVar(&r.Model, "reembed-model", "", "reembed: model of the new embedder (openai)")
	fs.StringVar(&r.Endpoint, "reembed-endpoint", "", "reembed: base URL of the new embedder's OpenAI-compatible API, including /v1")
	fs.IntVar(&r.Dimensions, "reembed-dimensions", 0, "reembed: dimensions of the new embedder's vectors")
	fs.IntVar(&r.Batch, "reembed-batch", DefaultReembedBatch, "reembed: rows one batch embeds and writes (1..256)")
	fs.Float64Var(&r.Pace, "reembed-pace", DefaultReembedPace, "reembed: pause after each batch, as a multiple of the batch's duration (0 = none, 1 = half the time filling)")
	fs.DurationVar(&r.MaxRun, "reembed-max-run", DefaultReembedMaxRun, "reembed: longest run; the next run resumes where this one stopped")
	fs.DurationVar(&r.UnreachableAfter, "reembed-unreachable-after", DefaultReembedUnreachableAfter, "reembed: end the run (exit code 3) when the embedder has failed for this long")
}

func (r ReembedOptions) check() error {
	if r.Provider == "" || r.Dimensions < 1 {
		return errors.New("--ops=reembed needs --reembed-provider and --reembed-dimensions")
	}
	if r.Batch < 1 || r.Batch > memory.ReembedMaxBatch {
		return fmt.Errorf("--reembed-batch %d: must be within 1..%d", r.Batch, memory.ReembedMaxBatch)
	}
	if r.Pace < 0 || r.Pace > 100 {
		return fmt.Errorf("--reembed-pace %g: must be within 0..100", r.Pace)
	}
	if r.MaxRun <= 0 || r.UnreachableAfter <= 0 {
		return errors.New("--reembed-max-run and --reembed-unreachable-after must be positive")
	}
	return nil
}

// runReembed is `manager job --ops=reembed`: one bounded run of the fill,
// as the login role, with the new embedder. It returns the summary and
// the exit code (ExitEmbedderUnreachable when the embedder kept failing).
func runReembed(ctx context.Context, o *Options, logger *slog.Logger) (memory.JobSummary, int) {
	r := o.Reembed
	if err := r.check(); err != nil {
		return Failed("", false, err), 2
	}
	cfg, err := workload.LoadServiceConfig(o.ConfigPath)
	if err != nil {
		return Failed("", false, err), 1
	}
	emb, err := memory.NewEmbedder(memory.EmbeddingConfig{Provider: r.Provider, Model: r.Model, Endpoint: r.Endpoint, Dimensions: r.Dimensions},
		o.EmbeddingAPIKey, &http.Client{Timeout: workload.DefaultUpstreamTimeout})
	if err != nil {
		return Failed(cfg.Schema, false, fmt.Errorf("creating the %s embedder to re-embed with: %w", r.Provider, err)), 2
	}
	sess := memory.SessionSettings{LockTimeout: o.LockTimeout, StatementTimeout: o.StatementTimeout}
	pool, err := memory.NewPool(ctx, o.DatabaseURL, int32(o.DBMaxConns), sess)
	if err != nil {
		return Failed(cfg.Schema, false, errors.New("the database URL is not a valid PostgreSQL connection URL (value not shown)")), 2
	}
	defer pool.Close()
	t := memory.ReembedTarget{Schema: cfg.Schema, LockTimeout: o.LockTimeout, StatementTimeout: o.StatementTimeout}
	id := memory.ReembedNamed(r.Provider, r.Model, r.Dimensions)
	loop := ReembedLoop{Filler: memory.NewReembedFiller(pool, t, id, markedEmbedder{emb}), Batch: r.Batch, Pace: r.Pace,
		MaxRun: r.MaxRun, UnreachableAfter: r.UnreachableAfter, Logger: logger}
	return ReembedRun(ctx, loop, cfg.Schema, id.String())
}

// ReembedRun runs loop and summarises it (one operation, reembed; its
// affected rows are those filled) with the exit code of Main.
func ReembedRun(ctx context.Context, loop ReembedLoop, schema, to string) (memory.JobSummary, int) {
	start := time.Now().UTC()
	if loop.Logger != nil {
		loop.Logger.Info("re-embed run starting", "schema", schema, "to", to, "batch", loop.Batch, "pace", loop.Pace)
	}
	res, err := loop.Run(ctx)
	sum := memory.JobSummary{Schema: schema, StartTime: start, CompletionTime: time.Now().UTC(), Result: memory.RunSucceeded,
		Operations: []memory.JobSummaryOp{{Name: OpReembed, Affected: res.Filled, Batches: res.Batches,
			DurationMillis: time.Since(start).Milliseconds()}}}
	code := 0
	switch {
	case errors.Is(err, ErrEmbedderUnreachable):
		sum.Result, sum.Message, code = memory.RunFailed, truncate(err.Error(), maxMessageBytes), ExitEmbedderUnreachable
	case err != nil:
		sum.Result, sum.Message, code = memory.RunFailed, truncate(failureMessage(err), maxMessageBytes), 1
	case !res.Done && res.CaughtUp:
		sum.Message = "no row left but not switched within the run's bound: the next run resumes"
	case !res.Done:
		sum.Message = "rows left: the next run resumes"
	}
	return sum, code
}
