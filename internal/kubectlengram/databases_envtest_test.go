package kubectlengram

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/demo"
)

// testDatabases: `databases` lists the MemoryDatabases with their
// reachability, tenants and room, `databases NAME` names the tenants placed
// there, and `status` says where each runtime lives.
func (cl *cluster) testDatabases(t *testing.T) {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "plugin-db-admin", Namespace: demo.OperatorNamespace},
		StringData: map[string]string{"uri": cl.dbURL}}
	db := &memoryv1alpha1.MemoryDatabase{ObjectMeta: metav1.ObjectMeta{Name: "plugin-db", Labels: map[string]string{"tier": "plugin"}},
		Spec: memoryv1alpha1.MemoryDatabaseSpec{SecretRef: memoryv1alpha1.SecretKeySelector{Name: secret.Name}, AllowedNamespaces: &metav1.LabelSelector{},
			Capacity: memoryv1alpha1.DatabaseCapacity{MaxTenants: ptr.To[int32](5)}}}
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "placed-bot", Namespace: cl.ns},
		Spec: memoryv1alpha1.MemoryRuntimeSpec{
			Database: memoryv1alpha1.DatabaseSpec{DatabaseSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "plugin"}}},
			Service:  memoryv1alpha1.ServiceSpec{Replicas: ptr.To[int32](0)}, // no service process needed here
		}}
	for _, o := range []client.Object{secret, db, rt} {
		if err := cl.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// They stay: the tenant is dropped with the others when the test ends.
	defer func() {
		if t.Failed() {
			var d memoryv1alpha1.MemoryDatabase
			_ = cl.c.Get(ctx, client.ObjectKey{Name: db.Name}, &d)
			t.Logf("runtime status: %+v\ndatabase status: %+v", cl.runtime(t, rt.Name).Status, d.Status)
		}
	}()
	cl.waitFor(t, "the runtime to be placed and provisioned", func() bool {
		r := cl.runtime(t, rt.Name)
		c := r.GetCondition(memoryv1alpha1.ConditionDatabaseReady)
		return r.PlacedDatabase() == db.Name && c != nil && c.Status == metav1.ConditionTrue
	})
	cl.waitFor(t, "the database to count its tenant", func() bool {
		var d memoryv1alpha1.MemoryDatabase
		return cl.c.Get(ctx, client.ObjectKey{Name: db.Name}, &d) == nil && d.Status.Tenants == 1
	})

	out := cl.ok(t, "databases")
	if !strings.Contains(out, "REACHABLE") || !regexpLine(out, "plugin-db", "True", "Connected", "1/5", "no") {
		t.Errorf("databases:\n%s", out)
	}
	var rows []DatabaseRow
	decodeJSON(t, cl.ok(t, "databases", "-o", "json"), &rows)
	if len(rows) != 1 || rows[0].Name != db.Name || rows[0].Tenants != 1 || rows[0].Version == "" || rows[0].BytesUsed == "" {
		t.Errorf("databases -o json = %+v", rows)
	}
	detail := cl.ok(t, "databases", db.Name)
	t.Logf("kubectl engram databases:\n%s\nkubectl engram databases %s:\n%s", out, db.Name, detail)
	if !strings.Contains(detail, "Tenants placed here (1):") || !strings.Contains(detail, cl.ns+"/placed-bot") || !strings.Contains(detail, "vector ") ||
		!regexpLine(detail, "Admits:", "every namespace") {
		t.Errorf("databases %s:\n%s", db.Name, detail)
	}
	if out := cl.ok(t, "status", rt.Name); !regexpLine(out, "Database:", db.Name) {
		t.Errorf("status %s:\n%s", rt.Name, out)
	}
	if out := cl.ok(t, "status"); !strings.Contains(out, "DATABASE") || !regexpLine(out, "placed-bot", db.Name) || !regexpLine(out, "support-bot", "connection/main") {
		t.Errorf("status table:\n%s", out)
	}
	cl.fails(t, cl.kubeconfig, `no memorydatabases.memory.engram.dev "nope" in the cluster`, "databases", "nope")
	cl.fails(t, cl.viewer, `forbidden: your RBAC lacks verb "list" on resource "memorydatabases.memory.engram.dev"`, "databases")
}
