package packaging

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/engram-dev/engram/internal/testenv"
)

// schedulingValues sets every scheduling value of the chart.
var schedulingValues = []string{
	"--set", "replicaCount=2",
	"--set", "nodeSelector.pool=system",
	"--set", "priorityClassName=platform-critical",
	"--set-json", `tolerations=[{"key":"dedicated","operator":"Equal","value":"system","effect":"NoSchedule"}]`,
	"--set-json", `affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"kubernetes.io/arch","operator":"In","values":["amd64"]}]}]}}}`,
	"--set-json", `topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]`,
}

// TestChartScheduling: the operator's pods take the chart's node selector,
// tolerations, affinity (plus a default spread over nodes), topology
// spread constraints (with the pods' selector filled in) and priority
// class, request and limit ephemeral storage, and get a
// PodDisruptionBudget when there is more than one replica.
func TestChartScheduling(t *testing.T) {
	helm := testenv.Binary(t, "ENGRAM_HELM", "make test builds helm into ./bin and sets ENGRAM_HELM")
	root := testenv.RepoRoot()
	objs := decode(t, run(t, root, helm, append([]string{"template", "engram", "charts/engram", "--namespace", namespace}, schedulingValues...)...))
	d := operatorDeployment(t, objs)
	ps := d.Spec.Template.Spec
	selector := d.Spec.Selector.MatchLabels
	if ps.NodeSelector["pool"] != "system" || ps.PriorityClassName != "platform-critical" ||
		len(ps.Tolerations) != 1 || ps.Tolerations[0].Key != "dedicated" || ps.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("nodeSelector %v, priorityClassName %q, tolerations %+v", ps.NodeSelector, ps.PriorityClassName, ps.Tolerations)
	}
	if a := ps.Affinity; a == nil || a.NodeAffinity == nil || a.PodAntiAffinity == nil ||
		len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 ||
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" ||
		!reflect.DeepEqual(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.LabelSelector.MatchLabels, selector) {
		t.Errorf("affinity = %+v, want the node affinity given and the default spread over nodes", a)
	}
	if tsc := ps.TopologySpreadConstraints; len(tsc) != 1 || tsc[0].TopologyKey != "topology.kubernetes.io/zone" ||
		tsc[0].LabelSelector == nil || !reflect.DeepEqual(tsc[0].LabelSelector.MatchLabels, selector) {
		t.Errorf("topologySpreadConstraints = %+v, want the zone spread with the operator's selector", tsc)
	}
	res := ps.Containers[0].Resources
	if res.Requests.StorageEphemeral().IsZero() || res.Limits.StorageEphemeral().IsZero() {
		t.Errorf("resources = %+v, want ephemeral-storage requested and limited", res)
	}

	pdbs := kinds(objs, "PodDisruptionBudget")
	if len(pdbs) != 1 {
		t.Fatalf("%d PodDisruptionBudgets with 2 replicas, want 1", len(pdbs))
	}
	var pdb policyv1.PodDisruptionBudget
	fromUnstructured(t, pdbs[0], &pdb)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || !reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, selector) ||
		pdb.Spec.UnhealthyPodEvictionPolicy == nil || *pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
		t.Errorf("PodDisruptionBudget = %+v", pdb.Spec)
	}

	// One replica: no budget (it could only block drains); off: none either.
	for _, args := range [][]string{nil, {"--set", "replicaCount=3", "--set", "podDisruptionBudget.enabled=false"}} {
		objs := decode(t, run(t, root, helm, append([]string{"template", "engram", "charts/engram", "--namespace", namespace}, args...)...))
		if n := len(kinds(objs, "PodDisruptionBudget")); n != 0 {
			t.Errorf("%v: %d PodDisruptionBudgets, want none", args, n)
		}
		// The default affinity is there whatever the replicas; podAntiAffinity: {} removes it.
		if a := operatorDeployment(t, objs).Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil {
			t.Errorf("%v: affinity = %+v, want the default spread over nodes", args, a)
		}
	}
	objs = decode(t, run(t, root, helm, "template", "engram", "charts/engram", "--namespace", namespace, "--set-json", `affinity={"podAntiAffinity":{}}`))
	if a := operatorDeployment(t, objs).Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 0 {
		t.Errorf("affinity.podAntiAffinity {} gave %+v, want no anti-affinity", a)
	}
}

func operatorDeployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	ds := kinds(objs, "Deployment")
	if len(ds) != 1 {
		t.Fatalf("%d Deployments rendered, want 1", len(ds))
	}
	var d appsv1.Deployment
	fromUnstructured(t, ds[0], &d)
	return &d
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("decoding %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}
