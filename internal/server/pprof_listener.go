package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// --pprof-listen serves Go's profiles (net/http/pprof: /debug/pprof/...) on
// a listener of its own, off by default and on a loopback address only: a
// profile shows the process's code and stacks and costs CPU while it runs,
// so no client of the API or of the metrics port may ask for one. In a pod,
// `kubectl port-forward` reaches the pod's loopback; the bench harness
// (bench --pprof) takes a CPU profile this way during a cell.

// pprofLoopback says whether addr (host:port) is on a loopback address: an
// IP of 127.0.0.0/8 or ::1, or "localhost". An empty host (every
// interface) is not.
func pprofLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof-listen %s: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--pprof-listen %s: must be a loopback address (127.0.0.1:PORT, [::1]:PORT or localhost:PORT): profiles are never served off the pod", addr)
}

// listenPprof opens the profiling listener; nil, nil when it is off ("").
func listenPprof(addr string, logger *slog.Logger) (*http.Server, net.Listener, error) {
	if addr == "" {
		return nil, nil, nil
	}
	if err := pprofLoopback(addr); err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listening for pprof on %s: %w", addr, err)
	}
	// "localhost" is what the resolver says it is (/etc/hosts may name
	// another address): the address bound decides.
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		_ = ln.Close()
		return nil, nil, fmt.Errorf("--pprof-listen %s: bound %s, not a loopback address: profiles are never served off the pod", addr, ln.Addr())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// No WriteTimeout: a CPU profile or trace answers after the
		// seconds it was asked for (pprof bounds them by this server's
		// WriteTimeout when one is set, so none is).
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 16 << 10,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Warn("pprof listener on: profiles of this process are served on a loopback address", "address", ln.Addr().String())
	return hs, ln, nil
}
