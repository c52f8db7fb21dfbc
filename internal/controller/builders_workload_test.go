package controller

import (
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// placedRuntime sets every scheduling knob a platform team sets.
func placedRuntime() *memoryv1alpha1.MemoryRuntime { return withPlacement(testRuntime()) }

// withPlacement sets on rt every scheduling knob a platform team sets.
func withPlacement(rt *memoryv1alpha1.MemoryRuntime) *memoryv1alpha1.MemoryRuntime {
	rt.Spec.Service.NodeSelector = map[string]string{"pool": "memory"}
	rt.Spec.Service.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "memory", Effect: corev1.TaintEffectNoSchedule}}
	rt.Spec.Service.PriorityClassName = "tenant-high"
	rt.Spec.Service.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
		}}},
	}}
	rt.Spec.Service.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
	}}
	return rt
}

// TestServiceScheduling: spec.service's node selector, tolerations,
// priority class, affinity and topology spread reach the service pods; a
// preferred anti-affinity by node is added unless podAntiAffinity is set;
// a spread constraint without selector gets the service's.
func TestServiceScheduling(t *testing.T) {
	rt := placedRuntime()
	ps := specs.Deployment(rt, "img", "h").Spec.Template.Spec
	if !reflect.DeepEqual(ps.NodeSelector, map[string]string{"pool": "memory"}) || ps.PriorityClassName != "tenant-high" ||
		!reflect.DeepEqual(ps.Tolerations, rt.Spec.Service.Tolerations) {
		t.Errorf("nodeSelector %v, priorityClassName %q, tolerations %+v", ps.NodeSelector, ps.PriorityClassName, ps.Tolerations)
	}
	if !reflect.DeepEqual(ps.Affinity.NodeAffinity, rt.Spec.Service.Affinity.NodeAffinity) {
		t.Errorf("nodeAffinity = %+v", ps.Affinity.NodeAffinity)
	}
	if !reflect.DeepEqual(ps.Affinity.PodAntiAffinity, specs.Deployment(testRuntime(), "img", "h").Spec.Template.Spec.Affinity.PodAntiAffinity) {
		t.Errorf("podAntiAffinity = %+v, want the default spread over nodes", ps.Affinity.PodAntiAffinity)
	}
	if rt.Spec.Service.Affinity.PodAntiAffinity != nil || rt.Spec.Service.TopologySpreadConstraints[0].LabelSelector != nil {
		t.Error("building the Deployment changed the runtime's spec")
	}
	tsc := ps.TopologySpreadConstraints
	if len(tsc) != 1 || tsc[0].TopologyKey != "topology.kubernetes.io/zone" ||
		!reflect.DeepEqual(tsc[0].LabelSelector, &metav1.LabelSelector{MatchLabels: naming.SelectorLabels("bot")}) {
		t.Errorf("topologySpreadConstraints = %+v, want the zone spread with the service's selector", tsc)
	}

	// The default anti-affinity: a preference, by node, on the service's
	// own pods, whatever the replicas (a scale-up must not roll the pods).
	plain := testRuntime()
	for _, replicas := range []int32{1, 2, 5} {
		plain.Spec.Service.Replicas = ptr.To(replicas)
		aff := specs.Deployment(plain, "img", "h").Spec.Template.Spec.Affinity
		if aff == nil || aff.NodeAffinity != nil || aff.PodAffinity != nil || aff.PodAntiAffinity == nil {
			t.Fatalf("replicas %d: affinity = %+v", replicas, aff)
		}
		pref := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		if len(pref) != 1 || pref[0].PodAffinityTerm.TopologyKey != specs.HostnameTopologyKey ||
			!reflect.DeepEqual(pref[0].PodAffinityTerm.LabelSelector.MatchLabels, naming.SelectorLabels("bot")) ||
			aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			t.Errorf("replicas %d: podAntiAffinity = %+v", replicas, aff.PodAntiAffinity)
		}
	}

	// The user's podAntiAffinity replaces the default; an empty one means none.
	required := &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: naming.SelectorLabels("bot")}, TopologyKey: specs.HostnameTopologyKey,
	}}}
	for _, own := range []*corev1.PodAntiAffinity{required, {}} {
		rt := testRuntime()
		rt.Spec.Service.Affinity = &corev1.Affinity{PodAntiAffinity: own}
		if got := specs.Deployment(rt, "img", "h").Spec.Template.Spec.Affinity.PodAntiAffinity; !reflect.DeepEqual(got, own) {
			t.Errorf("podAntiAffinity = %+v, want the user's %+v", got, own)
		}
	}
}

// TestJobPlacement: the maintenance job pods run where the runtime's
// service may (node selector, tolerations, priority class, node affinity),
// without the service's pod anti-affinity and topology spread.
func TestJobPlacement(t *testing.T) {
	rt := placedRuntime()
	ps := specs.CronJob(testRetentionJob(), rt, "img").Spec.JobTemplate.Spec.Template.Spec
	if !reflect.DeepEqual(ps.NodeSelector, rt.Spec.Service.NodeSelector) || ps.PriorityClassName != "tenant-high" ||
		!reflect.DeepEqual(ps.Tolerations, rt.Spec.Service.Tolerations) {
		t.Errorf("nodeSelector %v, priorityClassName %q, tolerations %+v", ps.NodeSelector, ps.PriorityClassName, ps.Tolerations)
	}
	if ps.Affinity == nil || !reflect.DeepEqual(ps.Affinity.NodeAffinity, rt.Spec.Service.Affinity.NodeAffinity) ||
		ps.Affinity.PodAntiAffinity != nil || ps.Affinity.PodAffinity != nil || len(ps.TopologySpreadConstraints) != 0 {
		t.Errorf("affinity %+v, topologySpreadConstraints %+v: want the node affinity only", ps.Affinity, ps.TopologySpreadConstraints)
	}
	plain := specs.CronJob(testRetentionJob(), testRuntime(), "img").Spec.JobTemplate.Spec.Template.Spec
	if plain.Affinity != nil || plain.NodeSelector != nil || plain.Tolerations != nil || plain.PriorityClassName != "" {
		t.Errorf("a runtime without scheduling fields gives its jobs %+v", plain)
	}
}

// TestEphemeralStorage: service and job containers request and limit
// ephemeral storage (kube-score: "Ephemeral Storage request/limit is not
// set" before), unless their resources already say something about it.
func TestEphemeralStorage(t *testing.T) {
	check := func(what string, r corev1.ResourceRequirements, req, lim string) {
		t.Helper()
		if got := r.Requests.StorageEphemeral().String(); got != req {
			t.Errorf("%s: ephemeral-storage request %s, want %s", what, got, req)
		}
		if got := r.Limits.StorageEphemeral().String(); got != lim {
			t.Errorf("%s: ephemeral-storage limit %s, want %s", what, got, lim)
		}
	}
	rt := testRuntime()
	check("service", specs.Deployment(rt, "img", "h").Spec.Template.Spec.Containers[0].Resources, "64Mi", "256Mi")
	check("job", specs.CronJob(testRetentionJob(), rt, "img").Spec.JobTemplate.Spec.Template.Spec.Containers[0].Resources, "64Mi", "256Mi")
	if _, ok := rt.Spec.Service.Resources.Requests[corev1.ResourceEphemeralStorage]; ok {
		t.Error("the default was written into the runtime's spec")
	}
	bare := testRuntime()
	bare.Spec.Service.Resources = corev1.ResourceRequirements{}
	check("service without resources", specs.Deployment(bare, "img", "h").Spec.Template.Spec.Containers[0].Resources, "64Mi", "256Mi")

	// A limit alone is the user's choice (Kubernetes sets the request to it).
	rt.Spec.Service.Resources.Limits[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
	check("service with a limit", specs.Deployment(rt, "img", "h").Spec.Template.Spec.Containers[0].Resources, "0", "1Gi")
	rj := testRetentionJob()
	rj.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("2Gi")}}
	check("job with a request", specs.CronJob(rj, rt, "img").Spec.JobTemplate.Spec.Template.Spec.Containers[0].Resources, "2Gi", "0")
}

// TestPodDisruptionBudget: maxUnavailable 1 over the service's pods, not
// ready pods always evictable; wanted only with more than one replica.
func TestPodDisruptionBudget(t *testing.T) {
	rt := testRuntime()
	pdb := specs.PodDisruptionBudget(rt)
	assertOwned(t, pdb.ObjectMeta, "memory-service")
	if pdb.Name != "bot" || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil ||
		!reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, naming.SelectorLabels("bot")) ||
		*pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
		t.Errorf("PodDisruptionBudget = %+v", pdb.Spec)
	}
	for _, c := range []struct {
		replicas *int32
		enabled  *bool
		want     bool
	}{
		{nil, nil, false}, {ptr.To[int32](0), nil, false}, {ptr.To[int32](1), nil, false},
		{ptr.To[int32](2), nil, true}, {ptr.To[int32](3), ptr.To(true), true}, {ptr.To[int32](3), ptr.To(false), false},
	} {
		rt := testRuntime()
		rt.Spec.Service.Replicas = c.replicas
		if c.enabled != nil {
			rt.Spec.Service.PodDisruptionBudget = &memoryv1alpha1.ServicePodDisruptionBudget{Enabled: c.enabled}
		}
		if got := rt.PodDisruptionBudgetWanted(); got != c.want {
			t.Errorf("replicas %v enabled %v: wanted = %v, want %v", ptr.Deref(c.replicas, -1), c.enabled, got, c.want)
		}
		kinds := map[string]bool{}
		for _, o := range ownedNames(rt) {
			kinds[o.kind] = true
		}
		if kinds["PodDisruptionBudget"] != c.want {
			t.Errorf("replicas %v: the ownership check covers the PodDisruptionBudget: %v, want %v", ptr.Deref(c.replicas, -1), kinds["PodDisruptionBudget"], c.want)
		}
	}
}

// TestServiceTLS: with spec.service.tls the Secret is mounted (group
// readable only), serve gets the TLS flags, the probes and the port speak
// HTTPS, and the endpoint is https.
func TestServiceTLS(t *testing.T) {
	rt := testRuntime()
	rt.Spec.Service.TLS = &memoryv1alpha1.ServiceTLS{SecretName: "bot-tls"}
	ps := specs.Deployment(rt, "img", "h").Spec.Template.Spec
	c := ps.Containers[0]
	if !slices.Contains(c.Command, "--tls-cert-file=/etc/engram/tls/tls.crt") || !slices.Contains(c.Command, "--tls-key-file=/etc/engram/tls/tls.key") {
		t.Errorf("command = %v", c.Command)
	}
	if len(c.Ports) != 2 || c.Ports[0].Name != "https" || c.Ports[0].ContainerPort != 9090 || c.Ports[1].Name != naming.MetricsPortName {
		t.Errorf("ports = %+v", c.Ports)
	}
	for what, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
		if p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Port.StrVal != "https" {
			t.Errorf("%s probe = %+v, want HTTPS on port https", what, p.HTTPGet)
		}
	}
	var mounted bool
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.Name == "tls" && m.MountPath == "/etc/engram/tls" && m.ReadOnly)
	}
	var vol *corev1.Volume
	for i := range ps.Volumes {
		if ps.Volumes[i].Name == "tls" {
			vol = &ps.Volumes[i]
		}
	}
	if !mounted || vol == nil || vol.Secret.SecretName != "bot-tls" || *vol.Secret.DefaultMode != 0o440 {
		t.Errorf("mounts %+v, volume %+v", c.VolumeMounts, vol)
	}
	if p := specs.Service(rt).Spec.Ports[0]; p.Name != "https" || p.TargetPort.StrVal != "https" || p.Port != 9090 {
		t.Errorf("service port = %+v", p)
	}
	if got := Endpoint(rt); got != "https://bot.team-a.svc:9090" {
		t.Errorf("endpoint = %s", got)
	}

	plain := testRuntime()
	pc := specs.Deployment(plain, "img", "h").Spec.Template.Spec.Containers[0]
	if slices.ContainsFunc(pc.Command, func(a string) bool { return len(a) > 5 && a[:6] == "--tls-" }) || pc.ReadinessProbe.HTTPGet.Scheme != "" || Endpoint(plain) != "http://bot.team-a.svc:9090" {
		t.Errorf("a runtime without TLS: command %v, probe %+v, endpoint %s", pc.Command, pc.ReadinessProbe.HTTPGet, Endpoint(plain))
	}
}

// TestStartingDeadlineSeconds: every CronJob has a starting deadline
// (kube-score: "The CronJob should have startingDeadlineSeconds configured"
// before), by default the shortest time between two runs, so however long
// the control plane was down, fewer than 100 missed runs are ever counted.
func TestStartingDeadlineSeconds(t *testing.T) {
	for _, c := range []struct {
		schedule string
		tz       *string
		want     time.Duration
	}{
		{"* * * * *", nil, time.Minute},
		{"*/5 * * * *", nil, 5 * time.Minute},
		{"0 3 * * *", ptr.To("Europe/Berlin"), 24 * time.Hour},
		{"@hourly", nil, time.Hour},
		{"0 3 * * 1-5", nil, 24 * time.Hour},    // weekdays: the 1-day gap, not the weekend's 3
		{"0 3 1,2 * *", nil, 24 * time.Hour},    // the 1st and 2nd of the month
		{"30 2 * * 0", nil, 7 * 24 * time.Hour}, // weekly
		{"@monthly", nil, 28 * 24 * time.Hour},
		{"0 0 29 2 *", nil, 4 * 365 * 24 * time.Hour}, // leap days only
	} {
		rj := testRetentionJob()
		rj.Spec.Schedule, rj.Spec.TimeZone = c.schedule, c.tz
		got := time.Duration(specs.StartingDeadlineSeconds(rj)) * time.Second
		if got != c.want && c.schedule != "0 0 29 2 *" {
			t.Errorf("%q: deadline %s, want %s", c.schedule, got, c.want)
		}
		if got < c.want {
			t.Errorf("%q: deadline %s is shorter than %s", c.schedule, got, c.want)
		}
		if cj := specs.CronJob(rj, testRuntime(), "img"); cj.Spec.StartingDeadlineSeconds == nil || *cj.Spec.StartingDeadlineSeconds != int64(got.Seconds()) {
			t.Errorf("%q: the CronJob's startingDeadlineSeconds = %v", c.schedule, cj.Spec.StartingDeadlineSeconds)
		}
		// The CronJob controller gives up past 100 missed runs in the window.
		if gap, _ := specs.ShortestInterval(c.schedule, c.tz); got/gap >= 100 {
			t.Errorf("%q: %s covers %d runs", c.schedule, got, got/gap)
		}
		if a, b := specs.StartingDeadlineSeconds(rj), specs.StartingDeadlineSeconds(rj); a != b {
			t.Errorf("%q: %d then %d: the CronJob would be rewritten on every reconcile", c.schedule, a, b)
		}
	}
	rj := testRetentionJob()
	rj.Spec.StartingDeadlineSeconds = ptr.To[int64](120)
	if got := ptr.Deref(specs.CronJob(rj, testRuntime(), "img").Spec.StartingDeadlineSeconds, 0); got != 120 {
		t.Errorf("spec.startingDeadlineSeconds 120 gave %d", got)
	}
}
