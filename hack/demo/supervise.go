package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/engram-dev/engram/internal/demo"
)

// state is what the supervisor publishes for `up`, `status` and `down`.
type state struct {
	PID        int               `json:"pid"`
	Ready      bool              `json:"ready"`
	Error      string            `json:"error,omitempty"`
	Kubeconfig string            `json:"kubeconfig"`
	APIServer  string            `json:"apiServer"`
	Endpoints  map[string]string `json:"endpoints"`
	// CitusURL is the Citus coordinator the operator was given ("": none).
	CitusURL string `json:"citusURL,omitempty"`
	// Embedder is the fake OpenAI-compatible embeddings server the
	// supervisor runs for the re-embed step (it outlives the scenario: the
	// second runtime keeps using it).
	Embedder *demo.EmbedderServer `json:"embedder,omitempty"`
	Updated  time.Time            `json:"updated"`
}

func readState(cfg config) (*state, error) {
	b, err := os.ReadFile(cfg.path("state.json"))
	if err != nil {
		return nil, err
	}
	var s state
	return &s, json.Unmarshal(b, &s)
}

// writeState replaces state.json atomically.
func writeState(cfg config, s *state) error {
	s.Updated = time.Now()
	b, _ := json.MarshalIndent(s, "", "  ")
	tmp := cfg.path("state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, cfg.path("state.json"))
}

// supervise runs the control plane, the operator and the local pod runner
// until SIGTERM or SIGINT, publishing state.json; then stops them in order.
func supervise(parent context.Context, cfg config) error {
	ctx, stop := signal.NotifyContext(parent, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo}))
	st := &state{PID: os.Getpid(), Endpoints: map[string]string{}, CitusURL: os.Getenv("CITUS_URL")}
	fail := func(err error) error {
		st.Error = err.Error()
		_ = writeState(cfg, st)
		return err
	}

	assets, dbURL := os.Getenv("KUBEBUILDER_ASSETS"), os.Getenv("DATABASE_URL")
	if assets == "" || dbURL == "" {
		return fail(errors.New("KUBEBUILDER_ASSETS and DATABASE_URL must be set (engram-demo up sets them)"))
	}
	cp, err := demo.StartControlPlane(assets, cfg.repoRoot, cfg.path("etcd"))
	if err != nil {
		return fail(err)
	}
	defer func() {
		log.Info("stopping kube-apiserver and etcd")
		if err := cp.Env.Stop(); err != nil {
			log.Warn("stopping the control plane", "error", err)
		}
	}()
	st.Kubeconfig, st.APIServer = cfg.path("kubeconfig"), cp.Config.Host
	if err := os.WriteFile(st.Kubeconfig, cp.Kubeconfig, 0o600); err != nil {
		return fail(err)
	}
	c, err := demo.NewClient(cp.Config)
	if err != nil {
		return fail(err)
	}
	if err := demo.Prepare(ctx, c, dbURL, st.CitusURL, demo.Namespace); err != nil {
		return fail(err)
	}

	key := make([]byte, 16)
	_, _ = rand.Read(key)
	fake, err := demo.StartFakeEmbedder("demo-" + hex.EncodeToString(key))
	if err != nil {
		return fail(err)
	}
	defer func() { _ = fake.Close() }()
	st.Embedder = &fake.Server

	opCtx, stopOperator := context.WithCancel(ctx)
	defer stopOperator()
	opDone, err := demo.StartOperator(opCtx, cp.Config, log.With("component", "operator"))
	if err != nil {
		return fail(err)
	}
	kubelet, err := demo.NewKubelet(cp.Config, cfg.binary, filepath.Join(cfg.stateDir, "pods"), log.With("component", "localpod"))
	if err != nil {
		return fail(err)
	}
	kCtx, stopKubelet := context.WithCancel(ctx)
	kDone := make(chan error, 1)
	go func() { kDone <- kubelet.Run(kCtx) }()

	st.Ready = true
	log.Info("demo environment up", "apiServer", st.APIServer, "kubeconfig", st.Kubeconfig)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for running := true; running; {
		st.Endpoints = kubelet.Endpoints()
		if err := writeState(cfg, st); err != nil {
			log.Warn("writing state", "error", err)
		}
		select {
		case <-ctx.Done():
			running = false
		case err := <-opDone:
			log.Error("the operator stopped", "error", err)
			running = false
		case <-tick.C:
		}
	}
	log.Info("shutting down: memory services and jobs first")
	stopKubelet()
	<-kDone
	stopOperator()
	select {
	case <-opDone:
	case <-time.After(15 * time.Second):
	}
	_ = os.Remove(cfg.path("state.json"))
	_ = os.Remove(cfg.path("supervisor.pid"))
	fmt.Println("demo environment stopped")
	return nil
}
