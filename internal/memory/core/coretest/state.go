// Package coretest gives the engine's part packages (conversation,
// longterm) what their tests need to run a part alone: a provisioned tenant
// and the core.State of its login role, with no façade in between.
// Imported by tests only.
package coretest

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/modelapi"
	"github.com/engram-dev/engram/internal/memory/pg"
	"github.com/engram-dev/engram/internal/memory/policy"
	"github.com/engram-dev/engram/internal/memory/textguard"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

var schemaSeq atomic.Int64

// NewState provisions a tenant on a fresh database (internal/tenant, the
// code the operator runs) and returns the state of its login role: the
// default policy resolved as memory.New resolves it, the builtin embedder,
// no LLM, the default byte cap.
func NewState(t testing.TB) *core.State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL := testenv.NewDatabase(t)
	admin := testenv.NewPool(t, dbURL, 2)
	schema := fmt.Sprintf("engram_part_%d_%d", time.Now().UnixNano()%1e6, schemaSeq.Add(1))
	owner := tenant.Owner{UID: "test-" + schema, Namespace: "test-" + schema, Name: schema}
	emb, err := modelapi.NewBuiltinEmbedder(384)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tenant.Provision(ctx, admin, tenant.Spec{Schema: schema, Dimensions: emb.Dimensions(), Owner: owner})
	if err != nil {
		t.Fatalf("provisioning: %v", err)
	}
	t.Cleanup(func() { _, _ = tenant.Drop(context.Background(), admin, schema, owner) })
	pool, err := pg.NewPool(ctx, testenv.WithUser(dbURL, res.LoginRole, res.Password), 4, pg.SessionSettings{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	red, err := textguard.NewRedactor(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	pol := policy.DefaultPolicy()
	pol.Conversation = pol.Conversation.Resolved()
	pol.Limits = pol.Limits.WithQuotaDefaults()
	return &core.State{Pool: pool, Schema: schema, Policy: pol, Embedder: emb, LLMTimeout: 2 * time.Second,
		Log: slog.New(slog.DiscardHandler), Redactor: red, MaxBytes: 1 << 20}
}
