package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/workload"
)

// Process is a running memory service.
type Process struct {
	Server      *Server
	addr        net.Addr
	metricsAddr net.Addr
	done        chan struct{}
	err         error
}

// Addr is the address the service listens on (useful with --listen=127.0.0.1:0).
func (p *Process) Addr() net.Addr { return p.addr }

// MetricsAddr is the address of the metrics listener, nil when it is off.
func (p *Process) MetricsAddr() net.Addr { return p.metricsAddr }

// Wait blocks until the service has shut down (ctx of Start done) and
// returns the first error of serving or shutting down.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// Start loads the config, opens the tenant's store, listens and serves until
// ctx is done, then shuts down gracefully: /readyz fails, the listener
// closes, in-flight requests get up to ShutdownTimeout to finish, then the
// store and the pool close. The database is not needed to start: requests
// get 503 and /readyz fails until it answers.
func Start(ctx context.Context, o Options, logger *slog.Logger) (*Process, error) {
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cfg, err := workload.LoadServiceConfig(o.ConfigPath)
	if err != nil {
		return nil, err
	}
	metrics := NewMetrics()
	limits := newLimits(o, metrics)
	tn, err := workload.Open(ctx, workload.StoreParams{
		Config:          cfg,
		DatabaseURL:     o.DatabaseURL,
		EmbeddingAPIKey: o.EmbeddingAPIKey,
		ReembedAPIKey:   o.ReembedAPIKey,
		CountDualWrite:  metrics.CountDualWrite,
		LLMAPIKey:       o.LLMAPIKey,
		RerankAPIKey:    o.RerankAPIKey,
		WrapReranker:    metrics.InstrumentReranker,
		MaxConns:        int32(o.DBMaxConns),
		Session:         memory.SessionSettings{LockTimeout: o.DBLockTimeout, StatementTimeout: o.DBStatementTimeout},
		WrapEmbedder:    metrics.InstrumentEmbedder,
		// The rate limit in front: a call it refuses is no upstream error.
		WrapLLM: func(l memory.LLM) memory.LLM { return limits.wrapLLM(metrics.InstrumentLLM(l)) },
		Logger:  logger.With("component", "memory"),
	})
	if err != nil {
		return nil, err
	}
	metrics.RegisterPool(tn.Pool)
	metrics.RegisterStats(tn.Store)
	tokens := NewTokens(o.TokensFile, o.SigningKeyFile, logger, metrics)
	var cert *certificate
	if o.TLSCertFile != "" {
		if cert, err = loadCertificate(o.TLSCertFile, o.TLSKeyFile, logger, metrics); err != nil {
			tn.Close()
			return nil, err
		}
	}
	srv := New(Deps{Store: tn.Store, Pool: tn.Pool, Schema: cfg.Schema, Tokens: tokens, Metrics: metrics, Logger: logger, Options: o,
		HasLLM: tn.HasLLM, Limits: limits, Export: exportInfo(cfg)})

	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		tn.Close()
		return nil, fmt.Errorf("listening on %s: %w", o.Listen, err)
	}
	mhs, mln, err := listenMetrics(o.MetricsListen, metrics, logger)
	if err != nil {
		ln.Close()
		tn.Close()
		return nil, err
	}
	phs, pln, err := listenPprof(o.PprofListen, logger)
	if err != nil {
		if mln != nil {
			mln.Close()
		}
		ln.Close()
		tn.Close()
		return nil, err
	}
	// WriteTimeout: an answer its client does not read is given up at
	// this deadline, so it holds its slot and its memory no longer
	// (requestbody.go).
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      o.writeTimeout(),
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if cert != nil {
		hs.TLSConfig = cert.tlsConfig()
	}
	p := &Process{Server: srv, addr: ln.Addr(), done: make(chan struct{})}
	metricsAt := "off"
	if mln != nil {
		p.metricsAddr = mln.Addr()
		metricsAt = mln.Addr().String()
	}
	logger.Info("memory service listening", "address", ln.Addr().String(), "tls", cert != nil, "metrics", metricsAt, "schema", cfg.Schema,
		"embedding", cfg.Embedding.Provider, "llm", tn.HasLLM, "policy", cfg.PolicyName, "policyGeneration", cfg.PolicyGeneration,
		"tokens", tokens.Count(), "signingKeys", tokens.SigningKeys().Len())

	watchCtx, stopWatch := context.WithCancel(context.Background())
	go tokens.Watch(watchCtx, o.TokensPollInterval)
	serveErr := make(chan error, 3)
	if cert != nil {
		go cert.Watch(watchCtx, o.TokensPollInterval)
		// The certificate comes from TLSConfig.GetCertificate, so no file here.
		go func() { serveErr <- hs.ServeTLS(ln, "", "") }()
	} else {
		go func() { serveErr <- hs.Serve(ln) }()
	}
	if mhs != nil {
		go func() {
			if err := mhs.Serve(mln); !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("metrics: %w", err)
			}
		}()
	}
	if phs != nil {
		go func() {
			if err := phs.Serve(pln); !errors.Is(err, http.ErrServerClosed) {
				serveErr <- fmt.Errorf("pprof: %w", err)
			}
		}()
	}
	go func() {
		defer close(p.done)
		defer stopWatch()
		defer stopMetrics(mhs)
		defer stopMetrics(phs)
		select {
		case <-ctx.Done():
		case err := <-serveErr:
			// Serve returned on its own: a listener failed.
			p.err = fmt.Errorf("serving HTTP: %w", err)
			_ = hs.Close()
			tn.Close()
			return
		}
		p.err = shutdown(hs, srv, o.ShutdownDelay, o.ShutdownTimeout, logger)
		tn.Close()
		logger.Info("memory service stopped")
	}()
	return p, nil
}

// shutdown fails readiness first and keeps serving for delay (so the pod
// leaves the Service's endpoints before its port closes), then stops
// accepting, waits up to timeout for in-flight requests, and closes
// whatever is left.
func shutdown(hs *http.Server, srv *Server, delay, timeout time.Duration, logger *slog.Logger) error {
	srv.SetDraining()
	if delay > 0 {
		logger.Info("shutting down: /readyz fails, still serving while endpoints update", "delay", delay.String())
		time.Sleep(delay)
	}
	logger.Info("shutting down: finishing in-flight requests", "timeout", timeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := hs.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		logger.Warn("in-flight requests did not finish within the shutdown timeout; closing their connections")
		_ = hs.Close()
		return nil
	}
	return err
}

// Main is `manager serve`: it parses args, starts the service and waits until
// ctx is done (SIGTERM or SIGINT in cmd/manager). It returns the exit code:
// 0 after a clean shutdown, 1 on a start or serve error, 2 on bad flags.
func Main(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	o, err := ParseFlags(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "manager serve: %v\n", err)
		return 2
	}
	logger, err := workload.NewLogger(stderr, o.LogLevel, o.LogFormat)
	if err != nil {
		fmt.Fprintf(stderr, "manager serve: %v\n", err)
		return 2
	}
	p, err := Start(ctx, *o, logger)
	if err != nil {
		logger.Error("memory service failed to start", "error", err.Error())
		return 1
	}
	if err := p.Wait(); err != nil {
		logger.Error("memory service failed", "error", err.Error())
		return 1
	}
	return 0
}

// exportInfo is what the service's exports say about it.
func exportInfo(cfg *memory.ServiceConfig) memory.ExportInfo {
	return memory.ExportInfo{
		EngramVersion: Version,
		Embedder:      memory.ExportEmbedder{Provider: cfg.Embedding.Provider, Model: cfg.Embedding.Model, Dimensions: cfg.Embedding.Dimensions},
		Policy:        cfg.PolicyName,
	}
}
