package node

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// testScheduling: the scheduling fields a platform team sets on every
// workload (spec.service nodeSelector, tolerations, affinity, topology
// spread constraints, priority class) reach the memory service's running
// Pods, the priority class resolved by admission into the Pod's priority.
// Then a nodeSelector that matches no node leaves the new Pod Pending,
// the old one serving, and the runtime's ServiceAvailable condition names
// the Pod and the scheduler's reason.
func (e *env) testScheduling(t *testing.T) {
	ctx := scenarioCtx(t, 5*time.Minute)
	ns := e.namespace(t, "scheduling")
	pc := e.priorityClass(t, ctx, 1000)

	rt := newRuntime(ns, "placed", 1, "256Mi")
	svc := &rt.Spec.Service
	// Labels every Linux node has, so the Pods land on the node of
	// hack/cluster.sh and on any node of a user's cluster alike.
	svc.NodeSelector = map[string]string{corev1.LabelOSStable: "linux"}
	svc.Tolerations = []corev1.Toleration{{Key: "engram.dev/e2e-dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	svc.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}},
		}}},
	}}
	svc.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
	}}
	svc.PriorityClassName = pc
	if err := e.cl.c.Create(ctx, rt); err != nil {
		t.Fatal(err)
	}
	e.waitReady(t, ns, "placed")
	e.waitAvailable(t, ns, "placed", 1)
	pods := e.servicePods(t, ns, "placed")
	if len(pods) != 1 {
		t.Fatalf("%d service Pods, want 1", len(pods))
	}
	checkScheduling(t, &pods[0], svc, pc)
	running := pods[0].Name

	// A nodeSelector no node matches: the Deployment's new Pod waits
	// (maxUnavailable 0: the old one keeps serving) and the status says why.
	patch := []byte(`{"spec":{"service":{"nodeSelector":{"engram.dev/e2e-nowhere":"true"}}}}`)
	if err := e.cl.c.Patch(ctx, rt, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	var msg string
	err := poll(ctx, time.Second, func() (bool, error) {
		if err := e.cl.c.Get(ctx, client.ObjectKeyFromObject(rt), rt); err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(rt.Status.Conditions, memoryv1alpha1.ConditionServiceAvailable)
		if c == nil {
			return false, nil
		}
		msg = c.Message
		return strings.Contains(msg, "cannot be scheduled") && strings.Contains(msg, "node affinity/selector"), nil
	})
	if err != nil {
		t.Fatalf("ServiceAvailable does not say that the new Pod cannot be scheduled: %v (last: %q)\n%s", err, msg, e.cl.describePods(ns))
	}
	t.Logf("ServiceAvailable: %s", msg)
	for _, p := range e.servicePods(t, ns, "placed") {
		if p.Name != running && (p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "") {
			t.Errorf("Pod %s: phase %s on node %q, want Pending on none", p.Name, p.Status.Phase, p.Spec.NodeName)
		}
	}
	if _, err := e.service(t, ns, "placed").add(ctx, "dora", "the old Pod serves while the new one waits for a node"); err != nil {
		t.Errorf("the Pod that ran before the change: %v", err)
	}
}

// checkScheduling compares the scheduling fields of a running service Pod
// with spec.service's (and the defaults the operator adds).
func checkScheduling(t *testing.T, p *corev1.Pod, svc *memoryv1alpha1.ServiceSpec, pc string) {
	t.Helper()
	if !podReady(p) || p.Spec.NodeName == "" {
		t.Errorf("Pod %s: Ready %v on node %q", p.Name, podReady(p), p.Spec.NodeName)
	}
	for k, v := range svc.NodeSelector {
		if p.Spec.NodeSelector[k] != v {
			t.Errorf("Pod %s: nodeSelector %v, want %s=%s", p.Name, p.Spec.NodeSelector, k, v)
		}
	}
	for _, want := range svc.Tolerations {
		if !slices.ContainsFunc(p.Spec.Tolerations, func(got corev1.Toleration) bool { return got.MatchToleration(&want) }) {
			t.Errorf("Pod %s: tolerations %v lack %v", p.Name, p.Spec.Tolerations, want)
		}
	}
	if a := p.Spec.Affinity; a == nil || !apiequality.Semantic.DeepEqual(a.NodeAffinity, svc.Affinity.NodeAffinity) || a.PodAntiAffinity == nil {
		t.Errorf("Pod %s: affinity %+v, want the runtime's node affinity and the operator's pod anti-affinity", p.Name, a)
	}
	tsc := p.Spec.TopologySpreadConstraints
	if len(tsc) != 1 || tsc[0].TopologyKey != corev1.LabelHostname || tsc[0].LabelSelector == nil ||
		!maps.Equal(tsc[0].LabelSelector.MatchLabels, naming.SelectorLabels(p.Labels[naming.LabelInstance])) {
		t.Errorf("Pod %s: topology spread %+v, want the runtime's, counting its own Pods", p.Name, tsc)
	}
	if p.Spec.PriorityClassName != pc || p.Spec.Priority == nil || *p.Spec.Priority != 1000 {
		t.Errorf("Pod %s: priority class %q priority %v, want %s (1000)", p.Name, p.Spec.PriorityClassName, p.Spec.Priority, pc)
	}
}

// priorityClass creates a PriorityClass of the run (cluster-scoped, so
// its name is the run's) and deletes it when the test ends.
func (e *env) priorityClass(t *testing.T, ctx context.Context, value int32) string {
	t.Helper()
	pc := &schedulingv1.PriorityClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "e2e-" + randomHex(3)},
		Value:       value,
		Description: "engram node suite",
	}
	if err := e.cl.c.Create(ctx, pc); err != nil {
		t.Fatalf("creating PriorityClass %s: %v", pc.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.cl.c.Delete(ctx, pc); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting PriorityClass %s: %v", pc.Name, err)
		}
	})
	return pc.Name
}
