package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// scenarioDatabaseAccess: spec.allowedNamespaces of a MemoryDatabase (issue
// 30). Two databases on one server: "open" admits the namespaces with the
// platform team's label, "closed" has no allowedNamespaces (as a database
// created before the field: it admits no new tenant). A tenant placed on
// closed before the field was cleared keeps working. A runtime of an
// admitted namespace is placed on open by selector; one of a namespace
// without the label is refused by both (NamespaceNotAllowed, Stalled), by
// selector and by databaseRef, with nothing created on the server. Labelling
// its namespace places them; a namespace that loses the label keeps its
// placed tenant where it is, working, and only its new runtimes are refused,
// also one whose status is edited to name a database (a forged placement).
func scenarioDatabaseAccess(e *operatorEnv, t *testing.T) {
	sfx := randomSuffix()
	tier, label := "access-"+sfx, "engram-test/access-"+sfx
	url := testenv.NewDatabase(t)
	mustCreate(t, e.c, uriSecret(e.opNS, "access-"+sfx, url))
	open := memoryDatabase("open-"+sfx, "access-"+sfx, map[string]string{"tier": tier}, 0)
	open.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}}
	closed := memoryDatabase("closed-"+sfx, "access-"+sfx, map[string]string{"tier": tier}, 0)
	mustCreate(t, e.c, open)
	mustCreate(t, e.c, closed) // allowedNamespaces {} for now
	e.waitReachable(t, open.Name, true, memoryv1alpha1.ReasonConnected)
	e.waitReachable(t, closed.Name, true, memoryv1alpha1.ReasonConnected)

	nsA, nsB := e.newNamespace(t, "access-a"), e.newNamespace(t, "access-b")
	update(t, e, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsA}}, func(n *corev1.Namespace) { n.Labels[label] = "yes" })

	// A tenant of nsB placed on closed while it admitted every namespace;
	// then closed loses the field. Its tenant is reconciled again (a spec
	// change of its database) and stays, working.
	legacy := databaseRuntime(nsB, "legacy", closed.Name, "")
	mustCreate(t, e.c, legacy)
	if db := e.placedOn(t, nsB, legacy.Name); db != closed.Name {
		t.Fatalf("legacy placed on %s", db)
	}
	e.waitCondition(t, nsB, legacy.Name, memoryv1alpha1.ConditionDatabaseReady, true, memoryv1alpha1.ReasonProvisioned)
	update(t, e, &memoryv1alpha1.MemoryDatabase{ObjectMeta: metav1.ObjectMeta{Name: closed.Name}}, func(d *memoryv1alpha1.MemoryDatabase) {
		d.Spec.AllowedNamespaces = nil
	})

	// By selector: closed refuses, open admits nsA.
	a := databaseRuntime(nsA, "a", "", tier)
	mustCreate(t, e.c, a)
	if db := e.placedOn(t, nsA, a.Name); db != open.Name {
		t.Errorf("%s/a placed on %s, want %s (the only database that admits it)", nsA, db, open.Name)
	}
	e.waitCondition(t, nsA, a.Name, memoryv1alpha1.ConditionDatabaseReady, true, memoryv1alpha1.ReasonProvisioned)

	// nsB has no label: refused by selector and by name, with nothing created.
	bSel, bRef := databaseRuntime(nsB, "by-selector", "", tier), databaseRuntime(nsB, "by-ref", open.Name, "")
	mustCreate(t, e.c, bSel)
	mustCreate(t, e.c, bRef)
	got := e.waitCondition(t, nsB, bSel.Name, memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonNamespaceNotAllowed)
	if err := containsAll(got.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message,
		closed.Name+": does not admit namespace "+nsB+" (spec.allowedNamespaces is not set",
		open.Name+": does not admit namespace "+nsB+" (its spec.allowedNamespaces does not match"); err != nil {
		t.Error(err)
	}
	if strings.Contains(got.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message, label) {
		t.Errorf("the refusal says open's selector (which may name other teams' namespaces): %s", got.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message)
	}
	got = e.waitCondition(t, nsB, bRef.Name, memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonNamespaceNotAllowed)
	if err := containsAll(got.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message, "(databaseRef "+open.Name+")", "does not admit namespace "+nsB); err != nil {
		t.Error(err)
	}
	if got.PlacedDatabase() != "" || got.Status.Schema != "" || schemaIn(t, url, SchemaFor(got)) {
		t.Errorf("a refused runtime got a placement or a schema: %+v", got.Status)
	}
	e.waitKStatus(t, bRef, status.FailedStatus, memoryv1alpha1.ReasonNamespaceNotAllowed)

	// The legacy tenant on closed is untouched by all this.
	if rt := e.waitCondition(t, nsB, legacy.Name, memoryv1alpha1.ConditionDatabaseReady, true, memoryv1alpha1.ReasonProvisioned); rt.PlacedDatabase() != closed.Name {
		t.Errorf("legacy moved to %q", rt.PlacedDatabase())
	}

	// The platform team labels nsB: the namespace's label change places
	// both (the watch; the periodic retry is placementRetry).
	start := time.Now()
	update(t, e, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsB}}, func(n *corev1.Namespace) { n.Labels[label] = "yes" })
	for _, name := range []string{bSel.Name, bRef.Name} {
		if db := e.placedOn(t, nsB, name); db != open.Name {
			t.Errorf("%s/%s placed on %s, want %s", nsB, name, db, open.Name)
		}
	}
	took := time.Since(start)
	t.Logf("placed %s after its label was set (the retry without the watch: %s)", took.Round(time.Millisecond), placementRetry)
	if took > placementRetry/2 {
		t.Errorf("placed %s after the label change: the periodic retry, not the Namespace watch", took.Round(time.Millisecond))
	}

	// nsA loses the label: its placed tenant stays on open, working (also
	// after a reconcile: a spec change of open reconciles its tenants);
	// a new runtime of nsA is refused.
	update(t, e, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsA}}, func(n *corev1.Namespace) { delete(n.Labels, label) })
	late := databaseRuntime(nsA, "late", open.Name, "")
	mustCreate(t, e.c, late)
	e.waitCondition(t, nsA, late.Name, memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonNamespaceNotAllowed)
	// Whoever may write late's status forges a placement on open: not
	// honoured (open does not admit nsA, and late's schema is not there),
	// nothing is created.
	forged := client.RawPatch(types.MergePatchType, []byte(`{"status":{"database":{"name":"`+open.Name+`"}}}`))
	if err := e.c.Status().Patch(testContext(t), &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: late.Name}}, forged); err != nil {
		t.Fatal(err)
	}
	update(t, e, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: late.Name}}, func(r *memoryv1alpha1.MemoryRuntime) {
		metav1.SetMetaDataAnnotation(&r.ObjectMeta, naming.AnnotationRotateCredentials, "after-forged-placement") // a reconcile
	})
	eventually(t, "the forged placement is refused", 30*time.Second, func() error {
		var rt memoryv1alpha1.MemoryRuntime
		if err := e.get(t, nsA, late.Name, &rt); err != nil {
			return err
		}
		c := rt.GetCondition(memoryv1alpha1.ConditionDatabaseReady)
		if rt.PlacedDatabase() != open.Name || c == nil || c.Reason != memoryv1alpha1.ReasonNamespaceNotAllowed || !strings.Contains(c.Message, "a placement the operator did not make") {
			return fmt.Errorf("placed on %q, DatabaseReady %+v", rt.PlacedDatabase(), c)
		}
		return nil
	})
	if schemaIn(t, url, SchemaFor(late)) {
		t.Errorf("a forged placement created schema %s on %s", SchemaFor(late), open.Name)
	}
	forgedPlacementIgnoresADecoy(t, e, url, late)
	// (Until it is removed, the forged placement counts as one of open's
	// tenants: the operator counts placements from status.)
	unforge := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/status/database"}]`))
	if err := e.c.Status().Patch(testContext(t), &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: late.Name}}, unforge); err != nil {
		t.Fatal(err)
	}
	update(t, e, &memoryv1alpha1.MemoryDatabase{ObjectMeta: metav1.ObjectMeta{Name: open.Name}}, func(d *memoryv1alpha1.MemoryDatabase) {
		d.Spec.Capacity.MaxTenants = ptr.To[int32](100)
	})
	e.waitReachable(t, open.Name, true, memoryv1alpha1.ReasonConnected) // checked at the new generation
	for range 3 {
		rt := e.waitCondition(t, nsA, a.Name, memoryv1alpha1.ConditionDatabaseReady, true, memoryv1alpha1.ReasonProvisioned)
		if rt.PlacedDatabase() != open.Name || !schemaIn(t, url, rt.Status.Schema) {
			t.Fatalf("%s/a after its namespace lost the label: placed on %q, schema %q", nsA, rt.PlacedDatabase(), rt.Status.Schema)
		}
		time.Sleep(time.Second)
	}
	e.waitTenants(t, open.Name, 3)
	e.waitTenants(t, closed.Name, 1)

	e.deleteAndWait(t, late, bSel, bRef, a, legacy)
	e.deleteAndWait(t, open, closed)
}

// forgedPlacementIgnoresADecoy: a schema of late's name on the forged
// database, made by hand with a marker that names late but not its UID,
// does not make the forged placement true (ownership is the UID marker,
// not a name): still refused, and the decoy is neither adopted nor changed.
func forgedPlacementIgnoresADecoy(t *testing.T, e *operatorEnv, url string, late *memoryv1alpha1.MemoryRuntime) {
	t.Helper()
	schema := SchemaFor(late)
	decoy := "managed-by=engram; runtime=" + late.Namespace + "/" + late.Name
	for _, stmt := range []string{"CREATE SCHEMA " + schema, "COMMENT ON SCHEMA " + schema + " IS '" + decoy + "'"} {
		if err := testenv.Exec(testContext(t), url, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() { _ = testenv.Exec(context.Background(), url, "DROP SCHEMA IF EXISTS "+schema) })
	update(t, e, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: late.Namespace, Name: late.Name}}, func(r *memoryv1alpha1.MemoryRuntime) {
		metav1.SetMetaDataAnnotation(&r.ObjectMeta, naming.AnnotationRotateCredentials, "beside-a-decoy-schema")
	})
	for range 3 { // the refusal holds over several reconciles
		rt := e.waitCondition(t, late.Namespace, late.Name, memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonNamespaceNotAllowed)
		if c := rt.GetCondition(memoryv1alpha1.ConditionDatabaseReady); !strings.Contains(c.Message, "a placement the operator did not make") {
			t.Fatalf("beside a decoy schema: DatabaseReady %+v", c)
		}
		time.Sleep(time.Second)
	}
	if _, comment := schemaAndComment(t, url, schema); comment != decoy {
		t.Errorf("the decoy schema's comment changed to %q: adopted", comment)
	}
	if err := testenv.Exec(testContext(t), url, "DROP SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
}
