package server

import (
	"errors"
	"flag"
	"fmt"
	"io"
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
	// TLSCertFile and TLSKeyFile, both or neither: serve HTTPS with that
	// pair (reloaded on change).
	TLSCertFile string
	TLSKeyFile  string

	// From the environment (Secrets), never flags.
	DatabaseURL     string
	EmbeddingAPIKey string
	LLMAPIKey       string

	MaxBodyBytes    int64
	MaxInflight     int
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
	DefaultMaxBodyBytes       = 1 << 20
	DefaultMaxInflight        = 64
	DefaultRequestTimeout     = 30 * time.Second
	DefaultShutdownTimeout    = 25 * time.Second
	DefaultShutdownDelay      = 5 * time.Second
	DefaultTokensPollInterval = 2 * time.Second
	DefaultDBMaxConns         = 10
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
	fs.IntVar(&o.MaxInflight, "max-inflight", DefaultMaxInflight, "API requests served at once; more get 429 (0 = no limit)")
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
	if o.MaxInflight < 0 {
		errs = append(errs, fmt.Errorf("--max-inflight %d: must not be negative", o.MaxInflight))
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

// withDefaults fills zero fields (for callers that build Options in code).
func (o Options) withDefaults() Options {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.TokensPollInterval == 0 {
		o.TokensPollInterval = DefaultTokensPollInterval
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
