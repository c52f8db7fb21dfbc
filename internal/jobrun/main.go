package jobrun

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/workload"
)

// DefaultDuty is `manager job --duty`: the share of its wall time a
// maintenance job works (docs/performance.md, "Jobs that don't hurt
// writers", measured it).
const DefaultDuty = 0.5

// Options configure `manager job`; docs/configuration.md lists them.
type Options struct {
	ConfigPath     string
	Ops            string
	DryRun         bool
	TerminationLog string
	BatchSize      int
	// CompactOwnerBudget bounds the time compaction spends on one owner.
	CompactOwnerBudget time.Duration
	// Duty and RowsPerSecond pace the batches (memory.JobOptions).
	Duty          float64
	RowsPerSecond float64
	DBMaxConns    int
	// LockTimeout and StatementTimeout are set on every database session.
	LockTimeout      time.Duration
	StatementTimeout time.Duration
	LogLevel         string
	LogFormat        string
	// Export is the destination of the export operation (--export-*).
	Export ExportDestination
	// Reembed configures the reembed operation (--reembed-*).
	Reembed ReembedOptions
	// From the environment.
	DatabaseURL     string
	EmbeddingAPIKey string
	// ReembedAPIKey is the key of the config's reembed.next embedder: a
	// compaction or an episode written during a re-embed dual-writes too.
	ReembedAPIKey string
	LLMAPIKey     string
}

// ParseFlags parses the arguments of `manager job`.
func ParseFlags(args []string, getenv func(string) string, output io.Writer) (*Options, error) {
	o := &Options{}
	fs := flag.NewFlagSet("manager job", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.ConfigPath, "config", "", "service config file (YAML of memory.ServiceConfig; the <runtime>-config ConfigMap)")
	fs.StringVar(&o.Ops, "ops", "decay,expire,purge,compact", "comma-separated operations of decay, expire, purge, compact, summarize, sessions; they always run in that order; or reembed alone (the operator's re-embed Job)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "count what would change and change nothing")
	fs.StringVar(&o.TerminationLog, "termination-log", naming.TerminationLogPath, "file the JSON summary is also written to (empty = none)")
	fs.IntVar(&o.BatchSize, "batch-size", 1000, "rows one statement touches at most")
	fs.DurationVar(&o.CompactOwnerBudget, "compact-owner-budget", memory.DefaultCompactOwnerBudget, "longest time compaction spends on one owner in a run; the owner's pass continues in the next run")
	fs.Float64Var(&o.Duty, "duty", DefaultDuty, "share of its wall time a job works, within 0.05..1: after each batch it pauses batch time x (1/duty - 1), so writers are not queued behind back-to-back batches; 1 = no pause")
	fs.Float64Var(&o.RowsPerSecond, "rows-per-second", 0, "most rows the batches touch per second of wall time (a pause after a batch until the budget allows the rows done); 0 = no budget")
	fs.IntVar(&o.DBMaxConns, "db-max-conns", 2, "size of the database connection pool")
	fs.DurationVar(&o.LockTimeout, "db-lock-timeout", memory.DefaultLockTimeout, "longest wait for a database lock (PostgreSQL lock_timeout of every session)")
	fs.DurationVar(&o.StatementTimeout, "db-statement-timeout", memory.DefaultJobStatementTimeout, "longest database statement, one batch or the VACUUM after compaction (statement_timeout of every session)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
	fs.StringVar(&o.LogFormat, "log-format", "json", "json or text")
	exportFlags(fs, &o.Export)
	reembedFlags(fs, &o.Reembed)
	err := fs.Parse(args)
	o.DatabaseURL = getenv(naming.EnvDatabaseURL)
	o.EmbeddingAPIKey = getenv(naming.EnvEmbeddingAPIKey)
	o.ReembedAPIKey = getenv(naming.EnvReembedEmbeddingAPIKey)
	o.LLMAPIKey = getenv(naming.EnvLLMAPIKey)
	if o.Export.S3 != nil {
		o.Export.S3.AccessKeyID = getenv(naming.EnvExportS3AccessKeyID)
		o.Export.S3.SecretAccessKey = getenv(naming.EnvExportS3SecretAccessKey)
	}
	if err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if o.BatchSize < 1 || o.BatchSize > 100_000 {
		return o, fmt.Errorf("--batch-size %d: must be within 1..100000", o.BatchSize)
	}
	if o.CompactOwnerBudget < time.Millisecond {
		return o, fmt.Errorf("--compact-owner-budget %s: must be at least 1ms", o.CompactOwnerBudget)
	}
	if !(o.Duty >= 0.05 && o.Duty <= 1) {
		return o, fmt.Errorf("--duty %g: must be within 0.05..1 (1 = no pause)", o.Duty)
	}
	if !(o.RowsPerSecond == 0 || o.RowsPerSecond >= 1 && o.RowsPerSecond <= 10_000_000) {
		return o, fmt.Errorf("--rows-per-second %g: must be 0 (no budget) or within 1..10000000", o.RowsPerSecond)
	}
	if o.DBMaxConns < 1 || o.DBMaxConns > 100 {
		return o, fmt.Errorf("--db-max-conns %d: must be within 1..100", o.DBMaxConns)
	}
	if o.LockTimeout < time.Millisecond || o.StatementTimeout < time.Millisecond {
		return o, fmt.Errorf("--db-lock-timeout %s and --db-statement-timeout %s: must be at least 1ms (no session runs without them)", o.LockTimeout, o.StatementTimeout)
	}
	return o, nil
}

// Main is `manager job`. It returns the exit code: 0 when the run succeeded
// or was skipped because another run holds the lock, 1 when it failed, 2 for
// bad flags. Every outcome but --help prints a summary.
func Main(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := ParseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		emit(o, Failed("", o.DryRun, fmt.Errorf("invalid arguments: %w", err)), stdout, nil)
		return 2
	}
	logger, err := workload.NewLogger(stderr, o.LogLevel, o.LogFormat)
	if err != nil {
		emit(o, Failed("", o.DryRun, err), stdout, nil)
		return 2
	}
	if strings.TrimSpace(o.Ops) == OpReembed {
		sum, code := runReembed(ctx, o, logger)
		emit(o, sum, stdout, logger)
		return code
	}
	sum := run(ctx, o, logger)
	emit(o, sum, stdout, logger)
	if sum.Result == memory.RunFailed {
		return 1
	}
	return 0
}

func run(ctx context.Context, o *Options, logger *slog.Logger) memory.JobSummary {
	ops, err := ParseOps(o.Ops)
	if err != nil {
		return Failed("", o.DryRun, err)
	}
	cfg, err := workload.LoadServiceConfig(o.ConfigPath)
	if err != nil {
		return Failed("", o.DryRun, err)
	}
	runner, err := withExport(ops, o, cfg)
	if err != nil {
		return Failed(cfg.Schema, o.DryRun, err)
	}
	sess := memory.SessionSettings{LockTimeout: o.LockTimeout, StatementTimeout: o.StatementTimeout}
	tn, err := workload.Open(ctx, workload.StoreParams{
		Config: cfg, DatabaseURL: o.DatabaseURL, EmbeddingAPIKey: o.EmbeddingAPIKey, ReembedAPIKey: o.ReembedAPIKey, LLMAPIKey: o.LLMAPIKey,
		MaxConns: int32(o.DBMaxConns), Session: sess, JobLeaseTTL: memory.JobLeaseTTLFor(sess),
		Logger: logger.With("component", "memory"),
	})
	if err != nil {
		return Failed(cfg.Schema, o.DryRun, err)
	}
	defer tn.Close()
	logger.Info("maintenance run starting", "schema", cfg.Schema, "operations", ops, "dryRun", o.DryRun, "batchSize", o.BatchSize,
		"duty", o.Duty, "rowsPerSecond", o.RowsPerSecond)
	sum := Run(ctx, runner(tn.Store), cfg.Schema, ops, memory.JobOptions{DryRun: o.DryRun, BatchSize: o.BatchSize, OwnerBudget: o.CompactOwnerBudget,
		Duty: o.Duty, RowsPerSecond: o.RowsPerSecond})
	logger.Info("maintenance run finished", "schema", cfg.Schema, "result", sum.Result, "message", sum.Message)
	return sum
}

// emit prints the summary as one JSON line and writes it to the
// termination-message file. A file that cannot be written is logged, not
// fatal: the maintenance itself is done, and the summary is still on stdout.
func emit(o *Options, sum memory.JobSummary, stdout io.Writer, logger *slog.Logger) {
	js, err := json.Marshal(sum)
	if err != nil { // cannot happen: JobSummary holds strings, numbers and times
		js = []byte(`{"result":"Failed","message":"encoding the summary failed"}`)
	}
	_, _ = fmt.Fprintf(stdout, "%s\n", js)
	if o == nil || o.TerminationLog == "" {
		return
	}
	if err := os.WriteFile(o.TerminationLog, js, 0o644); err != nil && logger != nil {
		logger.Warn("cannot write the termination message; the summary is on stdout only", "path", o.TerminationLog, "error", err.Error())
	}
}
