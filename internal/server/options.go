package server

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
)

// Options configure `manager serve`. Every flag and variable is described in
// docs/configuration.md; keep both in step.
type Options struct {
	ConfigPath     string
	TokensFile     string
	SigningKeyFile string
	Listen         string
	// MetricsListen is the address of GET /metrics, apart from the API's
	// ("" or "0": no metrics listener).
	MetricsListen string
	// PprofListen is the loopback address of Go's profiles
	// (/debug/pprof/, pprof_listener.go); "" (the default): none.
	PprofListen string
	// TLSCertFile and TLSKeyFile, both or neither: serve HTTPS with that
	// pair (reloaded on change).
	TLSCertFile string
	TLSKeyFile  string

	// From the environment (Secrets), never flags.
	DatabaseURL     string
	EmbeddingAPIKey string
	// ReembedAPIKey is the key of the config's reembed.next embedder.
	ReembedAPIKey string
	LLMAPIKey     string
	RerankAPIKey  string

	MaxBodyBytes int64
	// MaxImportBytes bounds the body of POST /v1/import (an export file,
	// read whole and validated before any owner is written).
	MaxImportBytes int64
	MaxInflight    int
	// MaxInflightPerCredential bounds the API requests of one credential
	// in flight at once, body reading included (inflight.go); 0 = no bound.
	MaxInflightPerCredential int
	// BodyTimeout is how long a request body may take to arrive; it is
	// read before the request takes one of the MaxInflight slots.
	BodyTimeout time.Duration
	// RateLimit is the token bucket of each credential for every API
	// request; LLMRateLimit the second one of LLM-backed requests
	// (ratelimit.go). A zero PerMinute turns one off.
	RateLimit    RateLimit
	LLMRateLimit RateLimit
	// clock is the rate limits' clock (time.Now when nil): tests move it
	// by hand, so what a bucket holds does not depend on the machine's
	// speed.
	clock           func() time.Time
	RequestTimeout  time.Duration
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long, after SIGTERM, the service keeps serving
	// with /readyz failing before it stops accepting: time for the
	// endpoints to drop the pod, so no client is sent to a closed port.
	ShutdownDelay      time.Duration
	TokensPollInterval time.Duration
	DBMaxConns         int
	DBLockTimeout      time.Duration
	DBStatementTimeout time.Duration
	LogLevel           string
	LogFormat          string
}

// Defaults of the flags.
const (
	DefaultListen             = ":8080"
	DefaultMetricsListen      = ":9090"
	DefaultMaxBodyBytes       = 1 << 20
	DefaultMaxImportBytes     = 32 << 20
	DefaultMaxInflight        = 64
	DefaultRequestTimeout     = 30 * time.Second
	DefaultShutdownTimeout    = 25 * time.Second
	DefaultShutdownDelay      = 5 * time.Second
	DefaultTokensPollInterval = 2 * time.Second
	DefaultDBMaxConns         = 10
)

// Defaults of the bounds of one credential's requests (inflight.go).
const (
	// DefaultMaxInflightPerCredential is a quarter of DefaultMaxInflight:
	// one credential cannot take the service from the others, and at the
	// default rate limit (100 requests a second) 16 at once leave each
	// 160 ms, far more than the service's requests take.
	DefaultMaxInflightPerCredential = 16
	// DefaultBodyTimeout leaves a 1 MiB body (--max-body-bytes) 100 KB a
	// second, far slower than any client inside a cluster sends.
	DefaultBodyTimeout = 10 * time.Second
)

// Default rate limits per credential, the same as the MemoryRuntime CRD's
// (api/v1alpha1). Generous on purpose: they stop one credential from
// taking the whole service, not normal use. 100 requests a second is more
// than an agent or a busy backend sends through one token, and a fraction
// of what a pod serves (docs/performance.md); one LLM-backed request a
// second (each makes up to a few model calls of seconds each) covers every
// session ending or being extracted while bounding the model bill.
var (
	DefaultRateLimit    = RateLimit{PerMinute: 6000, Burst: 200}
	DefaultLLMRateLimit = RateLimit{PerMinute: 60, Burst: 20}
)

// Bounds of the rate limit flags (the CRD has the same).
const (
	maxRatePerMinute = 6_000_000
	maxRateBurst     = 100_000
)

// ParseFlags parses the arguments of `manager serve` and reads the
// environment through getenv.
func ParseFlags(args []string, getenv func(string) string, output io.Writer) (*Options, error) {
	o := &Options{}
	fs := flag.NewFlagSet("manager serve", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.StringVar(&o.ConfigPath, "config", "", "service config file (YAML of memory.ServiceConfig; the <runtime>-config ConfigMap)")
	fs.StringVar(&o.TokensFile, "tokens-file", "", "file of bearer tokens, one a line with role=, owner=, name= (the <runtime>-api-token Secret's tokens key); reloaded on change")
	fs.StringVar(&o.SigningKeyFile, "signing-key-file", "", "file of the keys that verify signed tokens (the <runtime>-api-token Secret's signing-key key); reloaded on change; empty = no signed token is accepted")
	fs.StringVar(&o.Listen, "listen", DefaultListen, "address to listen on, host:port")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serve HTTPS with this PEM certificate (chain), e.g. a kubernetes.io/tls Secret's tls.crt; reloaded on change; with --tls-key-file")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", "", "the PEM private key of --tls-cert-file (tls.key); reloaded on change")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", DefaultMaxBodyBytes, "largest request body accepted; larger ones get 413")
	fs.Int64Var(&o.MaxImportBytes, "max-import-bytes", DefaultMaxImportBytes, "largest body of POST /v1/import (admin), an export file read whole before anything is written; larger ones get 413")
	fs.StringVar(&o.MetricsListen, "metrics-listen", DefaultMetricsListen, "address of GET /metrics, host:port, apart from the API's; \"0\" turns it off")
	fs.StringVar(&o.PprofListen, "pprof-listen", "", "loopback address (127.0.0.1:PORT) of Go's profiles, /debug/pprof/, a listener of its own; empty (the default) = off; for profiling only (kubectl port-forward)")
	fs.IntVar(&o.MaxInflight, "max-inflight", DefaultMaxInflight, "API requests served at once; more get 429 (0 = no limit)")
	fs.IntVar(&o.MaxInflightPerCredential, "max-inflight-per-credential", DefaultMaxInflightPerCredential,
		"API requests one credential may have in flight at once, reading their body included; more get 429 with Retry-After (0 = no limit; from --max-inflight on, only that binds)")
	fs.DurationVar(&o.BodyTimeout, "body-timeout", DefaultBodyTimeout, "longest time a request body may take to arrive, read before the request takes a --max-inflight slot; past it 400 (0 = the default)")
	fs.IntVar(&o.RateLimit.PerMinute, "rate-limit-per-minute", DefaultRateLimit.PerMinute, "API requests each credential may make a minute, on average (token bucket; 0 = no limit); more get 429 with Retry-After")
	fs.IntVar(&o.RateLimit.Burst, "rate-limit-burst", DefaultRateLimit.Burst, "API requests a credential may make at once after a pause (the bucket's size)")
	fs.IntVar(&o.LLMRateLimit.PerMinute, "llm-rate-limit-per-minute", DefaultLLMRateLimit.PerMinute, "LLM-backed requests (extract, end, compact) each credential may make a minute, on top of --rate-limit-per-minute (0 = no limit)")
	fs.IntVar(&o.LLMRateLimit.Burst, "llm-rate-limit-burst", DefaultLLMRateLimit.Burst, "LLM-backed requests a credential may make at once after a pause")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", DefaultRequestTimeout, "deadline of one API request (0 = none)")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", DefaultShutdownTimeout, "on SIGTERM, how long in-flight requests may take to finish")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay", DefaultShutdownDelay, "on SIGTERM, how long to keep serving with /readyz failing before the listener closes (endpoints drop the pod meanwhile)")
	fs.DurationVar(&o.TokensPollInterval, "tokens-poll-interval", DefaultTokensPollInterval, "how often the tokens, signing-key and TLS files are checked for changes")
	fs.IntVar(&o.DBMaxConns, "db-max-conns", DefaultDBMaxConns, "size of the database connection pool")
	fs.DurationVar(&o.DBLockTimeout, "db-lock-timeout", memory.DefaultLockTimeout, "longest wait for a database lock (lock_timeout of every session); past it the request gets 503")
	fs.DurationVar(&o.DBStatementTimeout, "db-statement-timeout", memory.DefaultStatementTimeout, "longest database statement (statement_timeout of every session); past it the request gets 503")
	fs.StringVar(&o.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.LogFormat, "log-format", "json", "json or text")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	o.DatabaseURL = getenv(naming.EnvDatabaseURL)
	o.EmbeddingAPIKey = getenv(naming.EnvEmbeddingAPIKey)
	o.LLMAPIKey = getenv(naming.EnvLLMAPIKey)
	o.RerankAPIKey = getenv(naming.EnvRerankAPIKey)
	o.ReembedAPIKey = getenv(naming.EnvReembedEmbeddingAPIKey)
	return o, o.Validate()
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	if o.ConfigPath == "" {
		errs = append(errs, errors.New("--config is required"))
	}
	if o.TokensFile == "" {
		errs = append(errs, errors.New("--tokens-file is required (the API never runs without authentication)"))
	}
	if o.DatabaseURL == "" {
		errs = append(errs, fmt.Errorf("%s is required (postgres:// URL of the tenant login role)", naming.EnvDatabaseURL))
	}
	if o.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("--max-body-bytes %d: must be at least 1024", o.MaxBodyBytes))
	}
	if o.MaxImportBytes < 1024 {
		errs = append(errs, fmt.Errorf("--max-import-bytes %d: must be at least 1024", o.MaxImportBytes))
	}
	if o.MaxInflight < 0 {
		errs = append(errs, fmt.Errorf("--max-inflight %d: must not be negative", o.MaxInflight))
	}
	if o.MaxInflightPerCredential < 0 {
		errs = append(errs, fmt.Errorf("--max-inflight-per-credential %d: must not be negative (0 = no limit)", o.MaxInflightPerCredential))
	}
	if o.BodyTimeout < 0 {
		errs = append(errs, errors.New("--body-timeout must not be negative (0 = the default)"))
	}
	errs = append(errs, o.RateLimit.validate("--rate-limit"), o.LLMRateLimit.validate("--llm-rate-limit"))
	if !metricsOff(o.MetricsListen) && o.MetricsListen == o.Listen && !strings.HasSuffix(o.Listen, ":0") {
		errs = append(errs, fmt.Errorf("--metrics-listen %s: must differ from --listen (metrics never share the API port)", o.MetricsListen))
	}
	if o.PprofListen != "" {
		if err := pprofLoopback(o.PprofListen); err != nil {
			errs = append(errs, err)
		} else if o.PprofListen == o.Listen || o.PprofListen == o.MetricsListen {
			errs = append(errs, fmt.Errorf("--pprof-listen %s: must differ from --listen and --metrics-listen", o.PprofListen))
		}
	}
	if o.RequestTimeout < 0 || o.ShutdownTimeout < 0 || o.ShutdownDelay < 0 {
		errs = append(errs, errors.New("--request-timeout, --shutdown-timeout and --shutdown-delay must not be negative"))
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file go together: set both to serve HTTPS, or neither"))
	}
	if o.TokensPollInterval <= 0 {
		errs = append(errs, errors.New("--tokens-poll-interval must be positive"))
	}
	if o.DBMaxConns < 1 || o.DBMaxConns > 1000 {
		errs = append(errs, fmt.Errorf("--db-max-conns %d: must be within 1..1000", o.DBMaxConns))
	}
	if o.DBLockTimeout < 0 || o.DBStatementTimeout < 0 {
		errs = append(errs, errors.New("--db-lock-timeout and --db-statement-timeout must not be negative (0 = the default)"))
	}
	return errors.Join(errs...)
}

// validate checks one rate limit; flag is the prefix of its flags.
func (l RateLimit) validate(flag string) error {
	if l.PerMinute < 0 || l.PerMinute > maxRatePerMinute {
		return fmt.Errorf("%s-per-minute %d: must be within 0..%d (0 = no limit)", flag, l.PerMinute, maxRatePerMinute)
	}
	if l.enabled() && (l.Burst < 1 || l.Burst > maxRateBurst) {
		return fmt.Errorf("%s-burst %d: must be within 1..%d", flag, l.Burst, maxRateBurst)
	}
	return nil
}

// withDefaults fills zero fields (for callers that build Options in code).
func (o Options) withDefaults() Options {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxImportBytes == 0 {
		o.MaxImportBytes = DefaultMaxImportBytes
	}
	if o.TokensPollInterval == 0 {
		o.TokensPollInterval = DefaultTokensPollInterval
	}
	if o.BodyTimeout == 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.DBMaxConns == 0 {
		o.DBMaxConns = DefaultDBMaxConns
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	if o.LogFormat == "" {
		o.LogFormat = "json"
	}
	return o
}
