package controller

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// idleWindow is how long an idle system must stay without writes.
const idleWindow = 30 * time.Second

// scenarioIdle: once everything the other scenarios left has settled, the
// operator makes no write request at all for 30 s, and no object's
// resourceVersion changes.
func scenarioIdle(e *operatorEnv, t *testing.T) {
	e.idleFixture(t)
	// Settle: the last status updates and events of the other scenarios.
	eventually(t, "the operator settles", 60*time.Second, func() error {
		n := e.writes.count()
		time.Sleep(3 * time.Second)
		if m := e.writes.count(); m != n {
			return fmt.Errorf("%d writes in 3 s: %v", m-n, e.writes.since(n))
		}
		return nil
	})
	var runtimes memoryv1alpha1.MemoryRuntimeList
	if err := e.c.List(testContext(t), &runtimes); err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, rt := range runtimes.Items {
		if meta.IsStatusConditionTrue(rt.Status.Conditions, memoryv1alpha1.ConditionReady) {
			ready++
		}
	}
	if ready < 3 {
		t.Fatalf("only %d Ready runtimes; the idle check's own are 3", ready)
	}

	e.waitPastSchedules(t)
	before := e.resourceVersions(t)
	mark := e.writes.count()
	t.Logf("watching %d objects (%d Ready runtimes) for %s", len(before), ready, idleWindow)
	time.Sleep(idleWindow)
	if writes := e.writes.since(mark); len(writes) > 0 {
		t.Errorf("the operator made %d write requests while idle: %v", len(writes), writes)
	}
	after := e.resourceVersions(t)
	for key, rv := range before {
		if after[key] != rv {
			t.Errorf("%s changed while idle: resourceVersion %s -> %s", key, rv, after[key])
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d objects before, %d after", len(before), len(after))
	}
}

// idleFixture makes sure the idle check watches every kind of object, also
// when it runs alone (go test -run 'TestOperator/Idle'): a policy, two Ready
// runtimes and a RetentionJob, and a MemoryDatabase (checked every second
// in this suite) with a Ready runtime placed on it.
func (e *operatorEnv) idleFixture(t *testing.T) {
	t.Helper()
	ns := e.botNamespace(t, "idle")
	mustCreate(t, e.c, nightly(ns))
	sfx := randomSuffix()
	mustCreate(t, e.c, uriSecret(e.opNS, "pg-idle-"+sfx, e.adminURL))
	db := memoryDatabase("idle-"+sfx, "pg-idle-"+sfx, nil, 10)
	mustCreate(t, e.c, db)
	e.waitReachable(t, db.Name, true, "")
	e.readyRuntime(t, databaseRuntime(ns, "placed", db.Name, ""))
}

// resourceVersions of every object of the kinds the operator reads or writes.
func (e *operatorEnv) resourceVersions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	lists := map[string]client.ObjectList{
		"MemoryRuntime": &memoryv1alpha1.MemoryRuntimeList{}, "MemoryPolicy": &memoryv1alpha1.MemoryPolicyList{},
		"RetentionJob": &memoryv1alpha1.RetentionJobList{}, "Deployment": &appsv1.DeploymentList{},
		"Service": &corev1.ServiceList{}, "ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{},
		"CronJob": &batchv1.CronJobList{}, "Job": &batchv1.JobList{}, "Pod": &corev1.PodList{},
		"NetworkPolicy": &networkingv1.NetworkPolicyList{}, "PodDisruptionBudget": &policyv1.PodDisruptionBudgetList{},
		// Checked every second in this suite: a check that finds the
		// database as it was writes nothing (status.lastCheck included).
		"MemoryDatabase": &memoryv1alpha1.MemoryDatabaseList{},
	}
	for kind, list := range lists {
		if err := e.c.List(testContext(t), list); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			o := it.(client.Object)
			if o.GetNamespace() == "default" && kind == "Service" {
				continue // the API server's own "kubernetes" Service
			}
			out[kind+" "+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	return out
}

// waitPastSchedules keeps a schedule's firing out of the idle window: when
// a RetentionJob's next run falls within it, the operator rightly writes
// the job's new status.nextScheduleTime then (a */15 schedule fired inside
// the window once). It waits until just after that run instead.
func (e *operatorEnv) waitPastSchedules(t *testing.T) {
	t.Helper()
	var jobs memoryv1alpha1.RetentionJobList
	if err := e.c.List(testContext(t), &jobs); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(idleWindow + 5*time.Second)
	var wait time.Time
	for _, rj := range jobs.Items {
		if n := rj.Status.NextScheduleTime; n != nil && n.After(time.Now()) && n.Time.Before(end) && n.After(wait) {
			wait = n.Time
		}
	}
	if wait.IsZero() {
		return
	}
	t.Logf("a RetentionJob runs at %s, within the idle window: waiting past it", wait.Format(time.TimeOnly))
	time.Sleep(time.Until(wait) + 5*time.Second)
}
