package controller

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/localpod"
)

// deployment is a Deployment at generation gen whose controller has
// observed observed, with updated and available of replicas (the status of
// the one Deployment stand-in, localpod.RolloutStatus).
func deployment(gen, observed int64, replicas, updated, available int32) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: gen},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
	}
	d.Status = localpod.RolloutStatus(d, replicas, updated, available)
	d.Status.ObservedGeneration = observed
	return d
}

// TestDeriveRuntimeStatus pins how the facts of one reconcile become
// conditions: Ready says whether the runtime serves, Reconciling whether
// the generation is still being acted on, Stalled whether a human must act.
func TestDeriveRuntimeStatus(t *testing.T) {
	type want struct {
		ready, readyReason        string
		reconciling, stalled      string // reasons; "" = absent
		observed                  bool   // status.observedGeneration = generation
		dbReady, serviceAvailable string // status; "" = absent
	}
	cases := []struct {
		name     string
		replicas int32
		f        runtimeFacts
		want     want
	}{
		{"rolled out (config hash unchanged)", 3, runtimeFacts{provisioned: "ok", deploy: deployment(2, 2, 3, 3, 3), endpoint: "http://bot:8080"},
			want{"True", "Available", "", "", true, "True", "True"}},
		{"config hash changed: new generation not seen by the Deployment controller", 3, runtimeFacts{deploy: deployment(3, 2, 3, 3, 3)},
			want{"True", "Available", "RollingOut", "", true, "", "True"}},
		{"rolling out: 1 of 3 updated and available", 3, runtimeFacts{deploy: deployment(3, 3, 3, 1, 1)},
			want{"True", "Available", "RollingOut", "", true, "", "True"}},
		{"first rollout: nothing available", 1, runtimeFacts{provisioned: "ok", deploy: deployment(1, 1, 1, 1, 0)},
			want{"False", "Deploying", "Deploying", "", true, "True", "False"}},
		{"scaled to zero", 0, runtimeFacts{deploy: deployment(1, 1, 0, 0, 0)},
			want{"False", "ScaledToZero", "", "", true, "", "False"}},
		{"waiting for a Secret", 1, runtimeFacts{blocked: &blocker{memoryv1alpha1.ConditionReady, "SecretNotFound", "no key"}},
			want{"False", "SecretNotFound", "SecretNotFound", "", true, "", ""}},
		{"database unreachable (retried)", 1, runtimeFacts{blocked: &blocker{memoryv1alpha1.ConditionDatabaseReady, "DatabaseUnreachable", "refused"}, err: errors.New("refused")},
			want{"False", "DatabaseUnreachable", "DatabaseUnreachable", "", false, "False", ""}},
		{"schema of another runtime", 1, runtimeFacts{blocked: &blocker{memoryv1alpha1.ConditionDatabaseReady, "SchemaOwnedByOther", "taken"}},
			want{"False", "SchemaOwnedByOther", "", "SchemaOwnedByOther", true, "False", ""}},
		{"API error: Ready keeps its value", 1, runtimeFacts{err: errors.New("etcd timeout")},
			want{"True", "Available", "ReconcileError", "", false, "", ""}},
		// Placement on MemoryDatabases (memoryruntime_placement.go).
		{"the database it lives on is down (its check says so)", 1, runtimeFacts{blocked: &blocker{memoryv1alpha1.ConditionDatabaseReady, "DatabaseUnreachable", "MemoryDatabase a is unreachable"}},
			want{"False", "DatabaseUnreachable", "DatabaseUnreachable", "", true, "False", ""}},
		{"waiting for a database to be checked or come back", 1, runtimeFacts{blocked: &blocker{memoryv1alpha1.ConditionDatabaseReady, "WaitingForDatabase", "a: not checked yet"}},
			want{"False", "WaitingForDatabase", "WaitingForDatabase", "", true, "False", ""}},
		{"no database can take the tenant", 1, runtimeFacts{blocked: &blocker{memoryv1alpha1.ConditionDatabaseReady, "NoDatabaseAvailable", "a: full"}},
			want{"False", "NoDatabaseAvailable", "", "NoDatabaseAvailable", true, "False", ""}},
		{"the spec names another database than the one it lives on", 1, runtimeFacts{blocked: &blocker{memoryv1alpha1.ConditionDatabaseReady, "DatabaseChanged", "lives on a"}},
			want{"False", "DatabaseChanged", "", "DatabaseChanged", true, "False", ""}},
		{"the database it lives on was deleted", 1, runtimeFacts{blocked: &blocker{memoryv1alpha1.ConditionDatabaseReady, "DatabaseNotFound", "gone"}},
			want{"False", "DatabaseNotFound", "", "DatabaseNotFound", true, "False", ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rt := testRuntime()
			rt.Generation = 7
			rt.Spec.Service.Replicas = ptr.To(c.replicas)
			rt.SetCondition(memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable, "before")
			deriveRuntimeStatus(rt, c.f)
			st := func(cond string) string {
				if x := rt.GetCondition(cond); x != nil {
					return string(x.Status)
				}
				return ""
			}
			reason := func(cond string) string {
				if x := rt.GetCondition(cond); x != nil && x.Status == metav1.ConditionTrue {
					return x.Reason
				}
				return ""
			}
			got := want{
				ready: st(memoryv1alpha1.ConditionReady), readyReason: rt.GetCondition(memoryv1alpha1.ConditionReady).Reason,
				reconciling: reason(memoryv1alpha1.ConditionReconciling), stalled: reason(memoryv1alpha1.ConditionStalled),
				observed: rt.Status.ObservedGeneration == 7,
				dbReady:  st(memoryv1alpha1.ConditionDatabaseReady), serviceAvailable: st(memoryv1alpha1.ConditionServiceAvailable),
			}
			if got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
			for _, cond := range []string{memoryv1alpha1.ConditionReconciling, memoryv1alpha1.ConditionStalled} {
				if x := rt.GetCondition(cond); x != nil && x.Status != metav1.ConditionTrue {
					t.Errorf("%s present with status %s: it is only ever present while True", cond, x.Status)
				}
			}
		})
	}

	t.Run("nothing observed: nothing changed", func(t *testing.T) {
		rt := testRuntime()
		rt.Generation = 2
		rt.SetCondition(memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable, "before")
		before := rt.DeepCopy()
		deriveRuntimeStatus(rt, runtimeFacts{untouched: true})
		if !equality.Semantic.DeepEqual(before.Status, rt.Status) {
			t.Errorf("status changed: %+v", rt.Status)
		}
		// A reconcile that stopped before the Deployment without a reason
		// (a simulated crash) leaves Ready alone: never a condition without reason.
		deriveRuntimeStatus(rt, runtimeFacts{})
		if c := rt.GetCondition(memoryv1alpha1.ConditionReady); c.Reason != memoryv1alpha1.ReasonAvailable {
			t.Errorf("Ready = %+v", c)
		}
	})

	t.Run("paused: no Reconciling, nothing else touched", func(t *testing.T) {
		rt := testRuntime()
		rt.Generation = 2
		rt.SetReconciling(memoryv1alpha1.ReasonRollingOut, "was rolling")
		deriveRuntimeStatus(rt, runtimeFacts{paused: true, deploy: deployment(2, 1, 1, 0, 0)})
		if !rt.IsPaused() || rt.GetCondition(memoryv1alpha1.ConditionReconciling) != nil || rt.Status.ObservedGeneration != 2 ||
			rt.GetCondition(memoryv1alpha1.ConditionReady) != nil {
			t.Errorf("conditions %+v observedGeneration %d", rt.Status.Conditions, rt.Status.ObservedGeneration)
		}
	})
}
