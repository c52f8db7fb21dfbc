package controller

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/localpod"
)

// kstatusOf computes what kstatus (Flux, Argo CD, kubectl wait --for ...)
// says about obj, read fresh from the API server.
func (e *operatorEnv) kstatusOf(t *testing.T, obj client.Object) (*status.Result, error) {
	t.Helper()
	if err := e.get(t, obj.GetNamespace(), obj.GetName(), obj); err != nil {
		return nil, err
	}
	gvk, err := e.c.GroupVersionKindFor(obj)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return status.Compute(u)
}

// waitKStatus waits until kstatus reports want for obj and, when reason is
// set, the Reconciling or Stalled condition has that reason.
func (e *operatorEnv) waitKStatus(t *testing.T, obj client.Object, want status.Status, reason string) {
	t.Helper()
	eventually(t, fmt.Sprintf("kstatus of %T %s is %s %s", obj, obj.GetName(), want, reason), 30*time.Second, func() error {
		res, err := e.kstatusOf(t, obj)
		if err != nil {
			return err
		}
		if res.Status != want {
			return fmt.Errorf("kstatus %s: %s", res.Status, res.Message)
		}
		if reason != "" {
			conds := conditionsOf(obj)
			if !hasTrueCondition(conds, memoryv1alpha1.ConditionReconciling, reason) && !hasTrueCondition(conds, memoryv1alpha1.ConditionStalled, reason) {
				return fmt.Errorf("kstatus %s, but no Reconciling/Stalled with reason %s: %v", res.Status, reason, conds)
			}
		}
		return nil
	})
}

func conditionsOf(obj client.Object) []metav1.Condition {
	switch o := obj.(type) {
	case *memoryv1alpha1.MemoryRuntime:
		return o.Status.Conditions
	case *memoryv1alpha1.RetentionJob:
		return o.Status.Conditions
	case *memoryv1alpha1.MemoryPolicy:
		return o.Status.Conditions
	case *memoryv1alpha1.MemoryDatabase:
		return o.Status.Conditions
	}
	return nil
}

func hasTrueCondition(conds []metav1.Condition, condType, reason string) bool {
	for _, c := range conds {
		if c.Type == condType && c.Status == metav1.ConditionTrue && c.Reason == reason {
			return true
		}
	}
	return false
}

// setRollout plays the deployment controller half way through a rollout
// (localpod.RolloutStatus): it has seen the Deployment's current generation,
// updated of its replicas run the new template and available of them serve.
func (e *operatorEnv) setRollout(t *testing.T, ns, name string, updated, available int32) {
	t.Helper()
	eventually(t, "setting the rollout of Deployment "+ns+"/"+name, 30*time.Second, func() error {
		var d appsv1.Deployment
		if err := e.get(t, ns, name, &d); err != nil {
			return err
		}
		d.Status = localpod.RolloutStatus(&d, *d.Spec.Replicas, updated, available)
		return e.c.Status().Update(testContext(t), &d)
	})
}

// scenarioKStatus: kstatus, which GitOps tools use to decide health, says
// Current only when a runtime really is ready for its current generation;
// InProgress while a phase waits (the Deployment rolls out, the database
// cannot be reached) and Failed when a phase failed for good (the schema
// belongs to another runtime). The same for RetentionJobs and MemoryPolicies.
func scenarioKStatus(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "kstatus")
	rt := newRuntime(ns, "bot", "")
	e.createRuntime(t, rt)
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, true, "")
	// No Deployment controller in envtest: the Deployment has no replica yet.
	e.waitKStatus(t, rt, status.InProgressStatus, memoryv1alpha1.ReasonDeploying)
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	e.waitKStatus(t, rt, status.CurrentStatus, "")

	// The demo case: a change to spec.service while the Deployment has 1 of
	// 3 replicas updated and available. Ready stays True (it serves), and
	// kstatus must say InProgress, not Current, for the new generation.
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Service.Replicas = ptr.To[int32](3) })
	eventually(t, "the Deployment asks for 3 replicas", 20*time.Second, func() error {
		var d appsv1.Deployment
		if err := e.get(t, ns, "bot", &d); err != nil {
			return err
		}
		if *d.Spec.Replicas != 3 {
			return fmt.Errorf("replicas %d", *d.Spec.Replicas)
		}
		return nil
	})
	e.setRollout(t, ns, "bot", 1, 1)
	e.waitKStatus(t, rt, status.InProgressStatus, memoryv1alpha1.ReasonRollingOut)
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	if got.Status.ObservedGeneration != got.Generation {
		t.Errorf("observedGeneration %d, generation %d: the operator has applied the new generation", got.Status.ObservedGeneration, got.Generation)
	}
	// It stays InProgress as long as the rollout does (no flip to Current
	// on a later reconcile).
	time.Sleep(time.Second)
	if res, err := e.kstatusOf(t, rt); err != nil || res.Status != status.InProgressStatus {
		t.Errorf("mid-rollout kstatus = %+v, %v", res, err)
	}
	e.markAvailable(t, ns, "bot")
	e.waitKStatus(t, rt, status.CurrentStatus, "")

	// A database that cannot be reached: InProgress (retried), not Failed.
	down := connectionSecret(e.opNS, "kstatus-down", fmt.Sprintf("postgres://x:y@127.0.0.1:%d/db?sslmode=disable&connect_timeout=2", closedPort(t)))
	mustCreate(t, e.c, down)
	unreachable := newRuntime(ns, "unreachable", "")
	unreachable.Spec.Database.ClusterConnection = "kstatus-down"
	since := time.Now()
	e.createRuntime(t, unreachable)
	e.waitKStatus(t, unreachable, status.InProgressStatus, memoryv1alpha1.ReasonDatabaseUnreachable)
	e.waitEventSince(t, ns, "unreachable", memoryv1alpha1.ReasonDatabaseUnreachable, "connection refused", since)
	if got := e.waitCondition(t, ns, "unreachable", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonDatabaseUnreachable); got.Status.ObservedGeneration == got.Generation {
		t.Errorf("observedGeneration %d while every reconcile of generation %d fails", got.Status.ObservedGeneration, got.Generation)
	}

	// The schema of another runtime: Failed, with a Warning event.
	shared := "ks_" + randomSuffix()
	first := newRuntime(ns, "first", "")
	first.Spec.Database.Schema = shared
	e.createRuntime(t, first)
	e.waitCondition(t, ns, "first", memoryv1alpha1.ConditionDatabaseReady, true, "")
	since = time.Now()
	thief := newRuntime(ns, "thief", "")
	thief.Spec.Database.Schema = shared
	e.createRuntime(t, thief)
	e.waitKStatus(t, thief, status.FailedStatus, memoryv1alpha1.ReasonSchemaOwnedByOther)
	e.waitEventSince(t, ns, "thief", memoryv1alpha1.ReasonSchemaOwnedByOther, "belongs to MemoryRuntime", since)
	got = e.waitCondition(t, ns, "thief", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonSchemaOwnedByOther)
	if got.GetCondition(memoryv1alpha1.ConditionReconciling) != nil {
		t.Errorf("a stalled runtime is also Reconciling: %v", got.Status.Conditions)
	}

	// RetentionJob: InProgress while its runtime does not exist, Current
	// once its CronJob is in place.
	rj := newRetentionJob(ns, "nightly", "later", "0 3 * * *", "purge")
	mustCreate(t, e.c, rj)
	e.waitKStatus(t, rj, status.InProgressStatus, memoryv1alpha1.ReasonRuntimeNotFound)
	update(t, e, rj, func(r *memoryv1alpha1.RetentionJob) { r.Spec.RuntimeRef.Name = "bot" })
	e.waitKStatus(t, rj, status.CurrentStatus, "")
	// An unknown time zone passes CEL; the operator refuses it: Failed.
	update(t, e, rj, func(r *memoryv1alpha1.RetentionJob) { r.Spec.TimeZone = ptr.To("Mars/Olympus_Mons") })
	e.waitKStatus(t, rj, status.FailedStatus, memoryv1alpha1.ReasonInvalidSchedule)
	update(t, e, rj, func(r *memoryv1alpha1.RetentionJob) { r.Spec.TimeZone = nil })
	e.waitKStatus(t, rj, status.CurrentStatus, "")

	// MemoryPolicy: Failed while invalid, Current when valid again, with
	// an event for each change of Valid.
	policy := standardPolicy(ns)
	mustCreate(t, e.c, policy)
	e.waitKStatus(t, policy, status.CurrentStatus, "")
	since = time.Now()
	update(t, e, policy, func(p *memoryv1alpha1.MemoryPolicy) { p.Spec.Redaction.Patterns = []string{"(unclosed"} })
	e.waitKStatus(t, policy, status.FailedStatus, memoryv1alpha1.ReasonInvalid)
	e.waitEventSince(t, ns, policy.Name, memoryv1alpha1.ReasonInvalid, "redaction.patterns[0]", since)
	update(t, e, policy, func(p *memoryv1alpha1.MemoryPolicy) { p.Spec.Redaction.Patterns = nil })
	e.waitKStatus(t, policy, status.CurrentStatus, "")
	e.waitEventSince(t, ns, policy.Name, memoryv1alpha1.ReasonValid, "valid again", since)

	// The runtimes that never get Ready go: the idle check runs later.
	for _, o := range []client.Object{unreachable, thief, first} {
		if err := e.c.Delete(testContext(t), o); err != nil {
			t.Errorf("deleting %s: %v", o.GetName(), err)
		}
	}
}
