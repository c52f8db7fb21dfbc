package kubectlengram

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/demo"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// TestMoveCommands drives `move`, `move abort` and `move confirm` against
// a real API server (the CRD's validation, CEL included, judges every
// patch; no operator: the test writes status.serverMove as the operator
// would).
func TestMoveCommands(t *testing.T) {
	env, cfg := testenv.ControlPlane(t)
	c, err := demo.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cl := &cluster{ns: "move-cmds", c: c}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cl.ns}}); err != nil {
		t.Fatal(err)
	}
	cl.kubeconfig = writeKubeconfig(t, env, envtest.User{Name: "move-admin", Groups: []string{"system:masters"}})
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: cl.ns},
		Spec: memoryv1alpha1.MemoryRuntimeSpec{Database: memoryv1alpha1.DatabaseSpec{ClusterConnection: "main"}}}
	if err := c.Create(ctx, rt); err != nil {
		t.Fatal(err)
	}
	home := memoryv1alpha1.RuntimeConnection{Via: "cluster/main", Database: "app", DatabaseOID: 16384, SystemIdentifier: "7312"}
	setStatus := func(mv *memoryv1alpha1.ServerMoveStatus) {
		t.Helper()
		r := cl.runtime(t, rt.Name)
		r.Status.Connection, r.Status.ServerMove = &home, mv
		if err := c.Status().Update(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	cl.fails(t, cl.kubeconfig, "has not recorded the connection its tenant is on", "move", rt.Name, "--to-cluster-connection", "pg-b")
	setStatus(nil)

	cl.fails(t, cl.kubeconfig, "exactly one of --to-cluster-connection", "move", rt.Name)
	cl.fails(t, cl.kubeconfig, "lives on cluster/main already", "move", rt.Name, "--to-cluster-connection", "main")
	cl.fails(t, cl.kubeconfig, "no move to confirm", "move", "confirm", rt.Name)
	cl.fails(t, cl.kubeconfig, "no move to abort", "move", "abort", rt.Name)

	// A dry run is judged by the API server and changes nothing.
	if out := cl.ok(t, "move", rt.Name, "--to-secret", "pg-b/url", "--dry-run"); !strings.Contains(out, "dry run") {
		t.Errorf("move --dry-run: %s", out)
	}
	if db := cl.runtime(t, rt.Name).Spec.Database; db.ClusterConnection != "main" || db.ConnectionSecretRef != nil || db.OnChange != "" {
		t.Errorf("a dry run changed spec.database: %+v", db)
	}
	out := cl.ok(t, "move", rt.Name, "--to-secret", "pg-b/url")
	if !strings.Contains(out, "from cluster/main to secret/move-cmds/pg-b/url") || !strings.Contains(out, "kubectl engram move confirm bot") {
		t.Errorf("move: %s", out)
	}
	db := cl.runtime(t, rt.Name).Spec.Database
	if db.ClusterConnection != "" || db.ConnectionSecretRef == nil || *db.ConnectionSecretRef != (memoryv1alpha1.SecretKeySelector{Name: "pg-b", Key: "url"}) ||
		db.OnChange != memoryv1alpha1.OnChangeMove {
		t.Errorf("after move --to-secret: spec.database = %+v", db)
	}

	// While it runs: abort sets the source back, confirm has nothing yet.
	to := memoryv1alpha1.RuntimeConnection{Via: "secret/move-cmds/pg-b/url", Database: "app", DatabaseOID: 16390}
	setStatus(&memoryv1alpha1.ServerMoveStatus{Run: 2, From: home, To: to, Phase: memoryv1alpha1.ServerMoveCatchingUp, CopiedRows: 1500, TotalRows: 2000, Passes: 1})
	if out := cl.ok(t, "status", rt.Name); !strings.Contains(out, "CatchingUp pass 1, 1,500/2,000 rows") {
		t.Errorf("status of a moving runtime:\n%s", out)
	}
	cl.fails(t, cl.kubeconfig, "is being moved to secret/move-cmds/pg-b/url", "move", rt.Name, "--to-cluster-connection", "pg-c")
	cl.fails(t, cl.kubeconfig, "is CatchingUp, not Switched", "move", "confirm", rt.Name)
	cl.ok(t, "move", "abort", rt.Name)
	db = cl.runtime(t, rt.Name).Spec.Database
	if db.ClusterConnection != "main" || db.ConnectionSecretRef != nil || db.OnChange != memoryv1alpha1.OnChangeMove {
		t.Errorf("after move abort: spec.database = %+v", db)
	}

	// A move from a Secret of another namespace is not set back by the plugin.
	setStatus(&memoryv1alpha1.ServerMoveStatus{Run: 3, From: memoryv1alpha1.RuntimeConnection{Via: "secret/other/pg/uri", Database: "x"}, To: to,
		Phase: memoryv1alpha1.ServerMoveCopying})
	cl.fails(t, cl.kubeconfig, `namespace "other"`, "move", "abort", rt.Name)

	// Switched: confirm names the run; abort is refused.
	cl.ok(t, "move", rt.Name, "--to-secret", "pg-b/url")
	setStatus(&memoryv1alpha1.ServerMoveStatus{Run: 4, From: home, To: to, Phase: memoryv1alpha1.ServerMoveSwitched, FreezeMillis: 3100})
	cl.fails(t, cl.kubeconfig, "has switched", "move", "abort", rt.Name)
	cl.fails(t, cl.kubeconfig, "is not confirmed", "move", rt.Name, "--to-cluster-connection", "main")
	if out := cl.ok(t, "move", "confirm", rt.Name); !strings.Contains(out, "confirmed move 4") || !strings.Contains(out, "Retain") {
		t.Errorf("move confirm: %s", out)
	}
	if v := cl.runtime(t, rt.Name).Annotations[naming.AnnotationMoveConfirmed]; v != "4" {
		t.Errorf("annotation %s = %q, want 4", naming.AnnotationMoveConfirmed, v)
	}
	var r memoryv1alpha1.MemoryRuntime
	if err := c.Get(ctx, client.ObjectKeyFromObject(rt), &r); err != nil || r.Spec.Database.ConnectionSecretRef == nil {
		t.Errorf("confirm touched spec.database: %+v, %v", r.Spec.Database, err)
	}
}
