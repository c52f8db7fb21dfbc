package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// scenarioTextSearchChange: a policy's new search.textSearchConfig reaches
// the tenant (issue 31): the operator builds the German text index, switches
// the tenant's text_search row and drops the English index; a runtime
// without a policy stays English. A second change right after waits for
// --text-search-min-interval (a LOW of issue 26): announced once in an
// event, the tenant still German meanwhile.
func scenarioTextSearchChange(e *operatorEnv, t *testing.T) {
	ns := e.botNamespace(t, "textsearch")
	schemaOf := func(name string) string {
		var rt memoryv1alpha1.MemoryRuntime
		if err := e.get(t, ns, name, &rt); err != nil {
			t.Fatal(err)
		}
		return rt.Status.Schema
	}
	bot, other := schemaOf("bot"), schemaOf("other")
	if err := wantTextSearch(testContext(t), e.pool, bot, "english", "memories_owner_text_idx"); err != nil {
		t.Fatalf("before: %v", err)
	}

	policy := &memoryv1alpha1.MemoryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "standard", Namespace: ns}}
	update(t, e, policy, func(p *memoryv1alpha1.MemoryPolicy) { p.Spec.Search.TextSearchConfig = "german" })
	eventually(t, "the tenant searches in German", 60*time.Second, func() error {
		return wantTextSearch(testContext(t), e.pool, bot, "german", "memories_owner_text_stored_german_idx")
	})
	// The ConfigMap is applied after provisioning, in the same reconcile.
	eventually(t, "the service config names German", 20*time.Second, func() error {
		if got := e.serviceConfig(t, ns, "bot").Policy.Search.TextSearchConfig; got != "german" {
			return fmt.Errorf("the service config says %q", got)
		}
		return nil
	})
	if err := wantTextSearch(testContext(t), e.pool, other, "english", "memories_owner_text_idx"); err != nil {
		t.Errorf("the runtime without a policy: %v", err)
	}

	update(t, e, policy, func(p *memoryv1alpha1.MemoryPolicy) { p.Spec.Search.TextSearchConfig = "french" })
	e.waitEvent(t, ns, "bot", memoryv1alpha1.ReasonTextSearchDeferred, "text search configuration french starts in")
	if err := wantTextSearch(testContext(t), e.pool, bot, "german", "memories_owner_text_stored_german_idx"); err != nil {
		t.Errorf("a switch right after the previous one was not deferred: %v", err)
	}
	// The team changes its mind before the wait ends: back to German, the
	// tenant's configuration, and nothing is left to switch. Left pending,
	// the deferred switch ran 5 minutes later, inside the idle check's
	// window (the CI of 2026-11-27: one event write while idle).
	update(t, e, policy, func(p *memoryv1alpha1.MemoryPolicy) { p.Spec.Search.TextSearchConfig = "german" })
	eventually(t, "the service config names German again", 20*time.Second, func() error {
		if got := e.serviceConfig(t, ns, "bot").Policy.Search.TextSearchConfig; got != "german" {
			return fmt.Errorf("the service config says %q", got)
		}
		return nil
	})
	if err := wantTextSearch(testContext(t), e.pool, bot, "german", "memories_owner_text_stored_german_idx"); err != nil {
		t.Errorf("after the policy came back to the tenant's configuration: %v", err)
	}
}

// wantTextSearch checks a tenant's text_search row and that its only text
// index of memories is index, valid.
func wantTextSearch(ctx context.Context, pool *pgxpool.Pool, schema, config, index string) error {
	var got string
	if err := pool.QueryRow(ctx, `SELECT config FROM `+pgx.Identifier{schema, "text_search"}.Sanitize()).Scan(&got); err != nil {
		return err
	}
	rows, err := pool.Query(ctx, `SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = to_regclass($1) AND c.relname LIKE 'memories\_owner\_text%'`, pgx.Identifier{schema, "memories"}.Sanitize())
	if err != nil {
		return err
	}
	idx := map[string]bool{}
	var name string
	var valid bool
	if _, err := pgx.ForEachRow(rows, []any{&name, &valid}, func() error { idx[name] = valid; return nil }); err != nil {
		return err
	}
	if got != config || len(idx) != 1 || !idx[index] {
		return fmt.Errorf("config %q, text indexes %v (valid), want %q and only %s", got, slices.Sorted(maps.Keys(idx)), config, index)
	}
	return nil
}
