package controller

// Found by the security review of issue 12: the legacy upgrade rule must
// only trust a status.schema the operator wrote after provisioning it.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// scenarioReviewLegacyClaimWithoutStatus: the legacy rule re-marks a schema of
// an earlier release (comment "tenant=<ns>/<name>", no UID) only for "the
// runtime whose status records it" (docs/security.md, the refusal message
// itself). But Reconcile writes status.schema = SchemaFor(rt) before
// provisioning decides anything, so after one refused reconcile every
// runtime "records" the schema it names: a runtime created today (never
// provisioned by an earlier release, new UID) that names a retained legacy
// schema of the same namespace/name takes it over, without the
// adopt-from-uid annotation a schema with a UID marker would need.
func scenarioReviewLegacyClaimWithoutStatus(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "legacy")
	ctx := testContext(t)
	schema := "review_legacy_" + randomSuffix()
	old := tenant.Owner{UID: "uid-of-a-deleted-runtime", Namespace: ns, Name: "bot"}
	res, err := tenant.Provision(ctx, e.pool, tenant.Spec{Schema: schema, Dimensions: int(memoryv1alpha1.DefaultEmbeddingDimensions), Owner: old})
	if err != nil {
		t.Fatal(err)
	}
	mark := func(schemaComment, roleComment string) {
		for _, stmt := range []string{
			"COMMENT ON SCHEMA " + pgx.Identifier{schema}.Sanitize() + " IS '" + schemaComment + "'",
			"COMMENT ON ROLE " + pgx.Identifier{res.OwnerRole}.Sanitize() + " IS '" + roleComment + "'",
			"COMMENT ON ROLE " + pgx.Identifier{res.LoginRole}.Sanitize() + " IS '" + roleComment + "'",
		} {
			if _, err := e.pool.Exec(context.Background(), stmt); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The markers of the earlier release, for the deleted runtime <ns>/bot.
	mark("managed-by=engram; tenant="+ns+"/bot", "managed-by=engram")

	rt := newRuntime(ns, "bot", "")
	rt.Spec.Database.Schema = schema
	mustCreate(t, e.c, rt) // not tracked: the cleanup below drops the tenant
	t.Cleanup(func() {
		_ = e.c.Delete(context.Background(), rt)
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if err := e.get(t, ns, "bot", &memoryv1alpha1.MemoryRuntime{}); apierrors.IsNotFound(err) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		m := fmt.Sprintf("managed-by=engram; uid=%s; runtime=%s/bot", old.UID, ns)
		mark(m, m)
		if _, err := tenant.Drop(context.Background(), e.pool, schema, old); err != nil {
			t.Logf("cleanup: %v", err)
		}
	})

	// Give the operator the time of a few reconciles.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		var comment string
		if err := e.pool.QueryRow(ctx, `SELECT coalesce(obj_description(oid, 'pg_namespace'), '') FROM pg_namespace WHERE nspname = $1`, schema).Scan(&comment); err != nil {
			t.Fatal(err)
		}
		var got memoryv1alpha1.MemoryRuntime
		if err := e.get(t, ns, "bot", &got); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(comment, "uid="+string(got.UID)) {
			t.Fatalf("a runtime created today (UID %s, no annotation, nothing in its status at creation) took over the retained legacy schema %s: %q", got.UID, schema, comment)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
