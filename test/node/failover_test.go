package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// testServicePodDeleted: one of support-bot's two Pods is deleted (the
// kubelet sends SIGTERM, the service drains) while a client writes through
// the Service; every write it acknowledged is there afterwards.
func (e *env) testServicePodDeleted(t *testing.T) {
	ctx := scenarioCtx(t, 5*time.Minute)
	ns := e.samplesNS
	e.ensureSamples(t)
	s := e.service(t, ns, sampleRuntime)
	pods := e.servicePods(t, ns, sampleRuntime)
	if len(pods) != 2 {
		t.Fatalf("%d service Pods, want 2", len(pods))
	}
	load := startLoad(ctx, s, "failover")
	defer load.stop()
	if err := load.waitFor(ctx, 5); err != nil {
		t.Fatal(err)
	}
	victim := pods[0]
	start := time.Now()
	if err := e.cl.c.Delete(ctx, &victim); err != nil {
		t.Fatal(err)
	}
	// Until the replacement serves and the deleted Pod is gone.
	err := poll(ctx, 500*time.Millisecond, func() (bool, error) {
		var p corev1.Pod
		err := e.cl.c.Get(ctx, client.ObjectKeyFromObject(&victim), &p)
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err) // still terminating
		}
		d, err := e.deployment(ctx, ns, sampleRuntime)
		return err == nil && d.Status.AvailableReplicas == 2 && d.Status.Replicas == 2, err
	})
	if err != nil {
		t.Fatalf("support-bot did not recover 2 replicas: %v\n%s", err, e.cl.describePods(ns))
	}
	t.Logf("Pod %s replaced in %s", victim.Name, time.Since(start).Round(100*time.Millisecond))
	if err := load.waitFor(ctx, load.ok()+20); err != nil {
		t.Fatal(err)
	}
	load.stop()
	load.checkAcked(t, ctx, s, "failover")
}

// testOperatorPodDeleted: on an idle, Ready system the operator's Pod is
// deleted; the Deployment's new Pod takes the leader election Lease over
// and, in its first minute as leader, writes nothing: no object of the
// tenants' namespace changes, and (on the node, from the API server's
// audit log) the operator's account sends no write but leader election's
// (the Lease and its "became leader" Event).
func (e *env) testOperatorPodDeleted(t *testing.T) {
	ctx := scenarioCtx(t, 6*time.Minute)
	ns := e.samplesNS
	e.ensureSamples(t)
	// Idle means nothing scheduled either: the samples' nightly run at
	// 03:00 UTC would be a legitimate write.
	nightly := &memoryv1alpha1.RetentionJob{}
	nightly.Namespace, nightly.Name = ns, "nightly"
	if err := e.cl.c.Patch(ctx, nightly, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))); err != nil {
		t.Fatal(err)
	}
	before := e.settle(t, ctx, ns)

	var pods corev1.PodList
	if err := e.cl.c.List(ctx, &pods, client.InNamespace(operatorNamespace), operatorPods); err != nil || len(pods.Items) != 1 {
		t.Fatalf("operator Pods: %v (%d)", err, len(pods.Items))
	}
	old := pods.Items[0]
	holder := e.leaseHolder(t, ctx)
	if !strings.HasPrefix(holder, old.Name) {
		t.Fatalf("the Lease is held by %q, not by the operator Pod %s", holder, old.Name)
	}
	audit := e.auditMark(t)
	deleted := time.Now()
	if err := e.cl.c.Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	var newHolder string
	err := poll(ctx, 500*time.Millisecond, func() (bool, error) {
		newHolder = e.leaseHolder(t, ctx)
		return newHolder != "" && !strings.HasPrefix(newHolder, old.Name), nil
	})
	if err != nil {
		t.Fatalf("no new leader: %v (Lease holder %q)\n%s", err, newHolder, e.cl.describePods(operatorNamespace))
	}
	tookOver := time.Since(deleted)
	e.cl.waitOperator(t)
	// The new leader's first reconcile of every object happens now.
	time.Sleep(45 * time.Second)
	after := e.resourceVersions(t, ctx, ns)
	for key, rv := range before {
		if after[key] != rv {
			t.Errorf("%s changed after the takeover: resourceVersion %s -> %s", key, rv, after[key])
		}
	}
	for key := range after {
		if _, ok := before[key]; !ok {
			t.Errorf("%s was created after the takeover", key)
		}
	}
	if n := e.operatorEvents(t, ctx, ns, deleted); n > 0 {
		t.Errorf("the operator recorded %d Events after the takeover", n)
	}
	if audit != nil {
		writes := audit.operatorWrites(t)
		if len(writes) > 0 {
			t.Errorf("the operator sent %d write requests (leader election aside) after its Pod was deleted: %v", len(writes), writes)
		}
	}
	t.Logf("new leader %s after %s; %d objects unchanged for 45 s after", newHolder, tookOver.Round(100*time.Millisecond), len(before))
}

// leaseHolder is the holder of the operator's leader election Lease.
func (e *env) leaseHolder(t *testing.T, ctx context.Context) string {
	t.Helper()
	var l coordinationv1.Lease
	if err := e.cl.c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: leaseName}, &l); err != nil {
		return ""
	}
	return strings.TrimSpace(ptrString(l.Spec.HolderIdentity))
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// settle waits until no object of ns changed for 10 s and returns their
// resourceVersions.
func (e *env) settle(t *testing.T, ctx context.Context, ns string) map[string]string {
	t.Helper()
	prev := e.resourceVersions(t, ctx, ns)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Second)
		cur := e.resourceVersions(t, ctx, ns)
		if fmt.Sprint(cur) == fmt.Sprint(prev) {
			return cur
		}
		prev = cur
	}
	t.Fatalf("namespace %s did not settle within 2 minutes", ns)
	return nil
}

// resourceVersions of every object of the kinds the operator writes in ns.
func (e *env) resourceVersions(t *testing.T, ctx context.Context, ns string) map[string]string {
	t.Helper()
	lists := map[string]client.ObjectList{
		"MemoryRuntime": &memoryv1alpha1.MemoryRuntimeList{}, "MemoryPolicy": &memoryv1alpha1.MemoryPolicyList{},
		"RetentionJob": &memoryv1alpha1.RetentionJobList{}, "Deployment": &appsv1.DeploymentList{},
		"Service": &corev1.ServiceList{}, "Secret": &corev1.SecretList{}, "ConfigMap": &corev1.ConfigMapList{},
		"CronJob": &batchv1.CronJobList{}, "NetworkPolicy": &networkingv1.NetworkPolicyList{},
	}
	out := map[string]string{}
	for kind, l := range lists {
		if err := e.cl.c.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatalf("listing %s: %v", kind, err)
		}
		items, err := apimeta.ExtractList(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			m, err := apimeta.Accessor(o)
			if err != nil {
				t.Fatal(err)
			}
			out[kind+"/"+m.GetName()] = m.GetResourceVersion()
		}
	}
	return out
}

// operatorEvents counts the Events of ns the operator reported since.
func (e *env) operatorEvents(t *testing.T, ctx context.Context, ns string, since time.Time) int {
	t.Helper()
	var evs eventsv1.EventList
	if err := e.cl.c.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs.Items {
		if strings.Contains(ev.ReportingController, "engram") && ev.CreationTimestamp.After(since) {
			n++
		}
	}
	return n
}
