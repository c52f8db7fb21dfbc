package specs

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// Where the pods of a runtime run: the scheduling fields of
// spec.service, as platform teams set them on every workload, plus the
// defaults the operator adds (a spread of the service replicas over nodes,
// ephemeral-storage requests and limits).

// HostnameTopologyKey is the node label that names one node.
const HostnameTopologyKey = "kubernetes.io/hostname"

// serviceScheduling sets the scheduling fields of a memory service pod:
// spec.service's node selector, tolerations, priority class, affinity and
// topology spread constraints. The affinity gets a preferred pod
// anti-affinity by node unless the user set podAntiAffinity: it is there
// whatever the replicas, so a scale-up adds pods without rolling the
// existing ones (a template change would), and with one replica it
// constrains nothing.
func serviceScheduling(rt *memoryv1alpha1.MemoryRuntime, spec *corev1.PodSpec) {
	commonScheduling(rt, spec)
	aff := &corev1.Affinity{}
	if rt.Spec.Service.Affinity != nil {
		aff = rt.Spec.Service.Affinity.DeepCopy()
	}
	if aff.PodAntiAffinity == nil {
		aff.PodAntiAffinity = spreadOverNodes(rt)
	}
	spec.Affinity = aff
	for _, c := range rt.Spec.Service.TopologySpreadConstraints {
		c = *c.DeepCopy()
		if c.LabelSelector == nil {
			// A constraint counts the pods its selector matches: without
			// one it would count none and constrain nothing.
			c.LabelSelector = &metav1.LabelSelector{MatchLabels: naming.SelectorLabels(rt.Name)}
		}
		spec.TopologySpreadConstraints = append(spec.TopologySpreadConstraints, c)
	}
}

// jobScheduling sets the scheduling fields of a maintenance job pod: the
// runtime's node selector, tolerations, priority class and node affinity,
// so its jobs run on the nodes its service may run on. The pod
// (anti-)affinity and topology spread of the service are about the service
// replicas among themselves and are not copied.
func jobScheduling(rt *memoryv1alpha1.MemoryRuntime, spec *corev1.PodSpec) {
	commonScheduling(rt, spec)
	if a := rt.Spec.Service.Affinity; a != nil && a.NodeAffinity != nil {
		spec.Affinity = &corev1.Affinity{NodeAffinity: a.NodeAffinity.DeepCopy()}
	}
}

func commonScheduling(rt *memoryv1alpha1.MemoryRuntime, spec *corev1.PodSpec) {
	svc := rt.Spec.Service
	if len(svc.NodeSelector) > 0 {
		spec.NodeSelector = make(map[string]string, len(svc.NodeSelector))
		for k, v := range svc.NodeSelector {
			spec.NodeSelector[k] = v
		}
	}
	for _, t := range svc.Tolerations {
		spec.Tolerations = append(spec.Tolerations, *t.DeepCopy())
	}
	spec.PriorityClassName = svc.PriorityClassName
}

// spreadOverNodes prefers nodes that run no other replica of the service,
// so one node's loss or drain takes at most its share of the replicas. It
// is a preference: on a single node every replica still schedules.
func spreadOverNodes(rt *memoryv1alpha1.MemoryRuntime) *corev1.PodAntiAffinity {
	return &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: &metav1.LabelSelector{MatchLabels: naming.SelectorLabels(rt.Name)},
				TopologyKey:   HostnameTopologyKey,
			},
		}},
	}
}

// Ephemeral storage of the service and job containers, unless their
// resources set some. The root filesystem is read-only, so what a
// container writes on the node is its /tmp (an emptyDir of at most
// tmpSizeLimit) and its log, which the kubelet rotates (by default 5 files
// of 10Mi). The limit covers both with room to spare; reaching it evicts
// the pod instead of filling the node's disk.
var (
	ephemeralStorageRequest = resource.MustParse("64Mi")
	ephemeralStorageLimit   = resource.MustParse("256Mi")
)

// withEphemeralStorage returns r with the default ephemeral-storage
// request and limit when r sets neither (one given alone is the user's
// choice: Kubernetes defaults a missing request to the limit).
func withEphemeralStorage(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	_, req := r.Requests[corev1.ResourceEphemeralStorage]
	_, lim := r.Limits[corev1.ResourceEphemeralStorage]
	if req || lim {
		return r
	}
	r = *r.DeepCopy()
	if r.Requests == nil {
		r.Requests = corev1.ResourceList{}
	}
	if r.Limits == nil {
		r.Limits = corev1.ResourceList{}
	}
	r.Requests[corev1.ResourceEphemeralStorage] = ephemeralStorageRequest
	r.Limits[corev1.ResourceEphemeralStorage] = ephemeralStorageLimit
	return r
}
