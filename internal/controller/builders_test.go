package controller

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/localpod"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/server"
)

func testRuntime() *memoryv1alpha1.MemoryRuntime {
	rt := &memoryv1alpha1.MemoryRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: "team-a", UID: "uid-1"},
		Spec: memoryv1alpha1.MemoryRuntimeSpec{
			Database: memoryv1alpha1.DatabaseSpec{ClusterConnection: "main"},
			Service: memoryv1alpha1.ServiceSpec{
				Replicas: ptr.To[int32](2),
				Port:     9090,
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
			},
		},
	}
	return rt
}

func TestDeployment(t *testing.T) {
	rt := testRuntime()
	rt.Spec.Embedding.APIKeySecretRef = &memoryv1alpha1.SecretKeySelector{Name: "openai"}
	rt.Spec.LLM = &memoryv1alpha1.LLMSpec{Endpoint: "http://x/v1", Model: "m", APIKeySecretRef: &memoryv1alpha1.SecretKeySelector{Name: "llm", Key: "token"}}
	d := specs.Deployment(rt, "ghcr.io/engram-dev/engram:1.0", "hash-1")

	assertOwned(t, d.ObjectMeta, "memory-service")
	if d.Name != "bot" || *d.Spec.Replicas != 2 {
		t.Errorf("name %s replicas %d", d.Name, *d.Spec.Replicas)
	}
	if !reflect.DeepEqual(d.Spec.Selector.MatchLabels, naming.SelectorLabels("bot")) {
		t.Errorf("selector = %v", d.Spec.Selector.MatchLabels)
	}
	tpl := d.Spec.Template
	if tpl.Annotations[naming.AnnotationConfigHash] != "hash-1" {
		t.Errorf("pod template annotations = %v", tpl.Annotations)
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if tpl.Labels[k] != v {
			t.Errorf("pod label %s != selector", k)
		}
	}
	ps := tpl.Spec
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Error("the service account token is mounted")
	}
	if sc := ps.SecurityContext; !*sc.RunAsNonRoot || *sc.RunAsUser != 65532 || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context = %+v", sc)
	}
	// The kubelet must not kill a pod that still drains: delay + timeout + margin.
	if g := ps.TerminationGracePeriodSeconds; g == nil || *g != 35 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 35", g)
	}
	c := ps.Containers[0]
	// The API on spec.service.port (9090 here), so the metrics move to 9091;
	// the rate limits are the defaults, written out.
	wantCmd := []string{"/manager", "serve", "--config=/etc/engram/config/config.yaml", "--tokens-file=/etc/engram/tokens/tokens", "--signing-key-file=/etc/engram/tokens/signing-key", "--listen=:9090",
		"--metrics-listen=:9091", "--shutdown-delay=5s", "--shutdown-timeout=25s",
		"--rate-limit-per-minute=6000", "--rate-limit-burst=200", "--llm-rate-limit-per-minute=60", "--llm-rate-limit-burst=20",
		"--max-inflight-per-credential=16"}
	if !slices.Equal(c.Command, wantCmd) || c.Image != "ghcr.io/engram-dev/engram:1.0" {
		t.Errorf("command = %v image %s", c.Command, c.Image)
	}
	if len(c.Ports) != 2 || c.Ports[0].ContainerPort != 9090 || c.Ports[0].Name != "http" ||
		c.Ports[1].ContainerPort != 9091 || c.Ports[1].Name != "metrics" {
		t.Errorf("ports = %+v", c.Ports)
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.ReadinessProbe.HTTPGet.Port.StrVal != "http" {
		t.Errorf("probes = %+v / %+v", c.LivenessProbe.HTTPGet, c.ReadinessProbe.HTTPGet)
	}
	if c.Resources.Requests.Cpu().String() != "100m" || c.Resources.Limits.Memory().String() != "256Mi" {
		t.Errorf("resources = %+v", c.Resources)
	}
	csc := c.SecurityContext
	if *csc.AllowPrivilegeEscalation || !*csc.ReadOnlyRootFilesystem || !*csc.RunAsNonRoot || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context = %+v", csc)
	}
	env := envByName(c.Env)
	for name, ref := range map[string][2]string{
		"ENGRAM_DATABASE_URL":      {"bot-db", "uri"},
		"ENGRAM_EMBEDDING_API_KEY": {"openai", "apiKey"},
		"ENGRAM_LLM_API_KEY":       {"llm", "token"},
	} {
		e, ok := env[name]
		if !ok || e.ValueFrom.SecretKeyRef.Name != ref[0] || e.ValueFrom.SecretKeyRef.Key != ref[1] {
			t.Errorf("env %s = %+v, want from Secret %s key %s", name, e, ref[0], ref[1])
		}
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["config"] != "/etc/engram/config" || mounts["tokens"] != "/etc/engram/tokens" {
		t.Errorf("mounts = %v", mounts)
	}
	vols := map[string]corev1.Volume{}
	for _, v := range ps.Volumes {
		vols[v.Name] = v
	}
	if vols["config"].ConfigMap.Name != "bot-config" || vols["tokens"].Secret.SecretName != "bot-api-token" {
		t.Errorf("volumes = %+v", ps.Volumes)
	}

	plain := specs.Deployment(testRuntime(), "img", "h")
	if len(plain.Spec.Template.Spec.Containers[0].Env) != 1 {
		t.Errorf("a runtime without API keys gets env %v", plain.Spec.Template.Spec.Containers[0].Env)
	}
}

func TestService(t *testing.T) {
	s := specs.Service(testRuntime())
	assertOwned(t, s.ObjectMeta, "memory-service")
	p := s.Spec.Ports[0]
	if s.Name != "bot" || p.Port != 9090 || p.TargetPort.StrVal != "http" || s.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("service = %s %+v", s.Name, s.Spec)
	}
	if !reflect.DeepEqual(s.Spec.Selector, naming.SelectorLabels("bot")) {
		t.Errorf("selector = %v", s.Spec.Selector)
	}
}

func TestServiceAvailability(t *testing.T) {
	rt := testRuntime()
	avail := func(n int32) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
		d.Status = localpod.RolloutStatus(d, 2, 2, n)
		return d
	}
	if ok, reason, _ := specs.ServiceAvailability(rt, nil); ok || reason != "Deploying" {
		t.Errorf("no Deployment: %v %s", ok, reason)
	}
	if ok, reason, _ := specs.ServiceAvailability(rt, avail(0)); ok || reason != "Deploying" {
		t.Errorf("0 available: %v %s", ok, reason)
	}
	if ok, reason, msg := specs.ServiceAvailability(rt, avail(2)); !ok || reason != "MinimumReplicasAvailable" || msg != "2 of 2 replicas available" {
		t.Errorf("2 available: %v %s %q", ok, reason, msg)
	}
	rt.Spec.Service.Replicas = ptr.To[int32](0)
	if ok, reason, _ := specs.ServiceAvailability(rt, avail(0)); ok || reason != "ScaledToZero" {
		t.Errorf("scaled to zero: %v %s", ok, reason)
	}
}

func testRetentionJob() *memoryv1alpha1.RetentionJob {
	return &memoryv1alpha1.RetentionJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "team-a", UID: "rj-uid"},
		Spec: memoryv1alpha1.RetentionJobSpec{
			RuntimeRef:            &memoryv1alpha1.LocalObjectReference{Name: "bot"},
			Schedule:              "0 3 * * *",
			TimeZone:              ptr.To("Europe/Berlin"),
			Operations:            []memoryv1alpha1.Operation{"compact", "purge", "decay"},
			ConcurrencyPolicy:     memoryv1alpha1.ConcurrencyReplace,
			ActiveDeadlineSeconds: ptr.To[int64](600),
			DryRun:                true,
		},
	}
}

func TestCronJob(t *testing.T) {
	rt := testRuntime()
	rt.Spec.Embedding.APIKeySecretRef = &memoryv1alpha1.SecretKeySelector{Name: "openai"}
	cj := specs.CronJob(testRetentionJob(), rt, "img:1")
	if cj.Name != "nightly-bot" || cj.Namespace != "team-a" {
		t.Errorf("name = %s/%s", cj.Namespace, cj.Name)
	}
	if len(cj.OwnerReferences) != 1 || cj.OwnerReferences[0].Kind != "RetentionJob" || !*cj.OwnerReferences[0].Controller {
		t.Errorf("owner = %+v", cj.OwnerReferences)
	}
	s := cj.Spec
	if s.Schedule != "0 3 * * *" || *s.TimeZone != "Europe/Berlin" || s.ConcurrencyPolicy != batchv1.ReplaceConcurrent || *s.Suspend {
		t.Errorf("spec = %+v", s)
	}
	if *s.SuccessfulJobsHistoryLimit != 3 || *s.FailedJobsHistoryLimit != 1 {
		t.Errorf("history limits = %d/%d, want the defaults 3/1", *s.SuccessfulJobsHistoryLimit, *s.FailedJobsHistoryLimit)
	}
	for _, l := range []map[string]string{cj.Labels, s.JobTemplate.Labels, s.JobTemplate.Spec.Template.Labels} {
		if l[naming.LabelRetentionJob] != "nightly" || l[naming.LabelRuntime] != "bot" || l[naming.LabelComponent] != "maintenance-job" {
			t.Errorf("labels = %v", l)
		}
	}
	js := s.JobTemplate.Spec
	if *js.ActiveDeadlineSeconds != 600 || *js.BackoffLimit != 0 || js.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("job spec = %+v", js)
	}
	c := js.Template.Spec.Containers[0]
	wantCmd := []string{"/manager", "job", "--config=/etc/engram/config/config.yaml", "--ops=decay,purge,compact", "--termination-log=/dev/termination-log", "--dry-run"}
	if !slices.Equal(c.Command, wantCmd) {
		t.Errorf("command = %v\nwant      %v", c.Command, wantCmd)
	}
	if c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError || c.Image != "img:1" {
		t.Errorf("termination message policy %s image %s", c.TerminationMessagePolicy, c.Image)
	}
	env := envByName(c.Env)
	if env["ENGRAM_DATABASE_URL"].ValueFrom.SecretKeyRef.Name != "bot-db" || env["ENGRAM_EMBEDDING_API_KEY"].ValueFrom == nil {
		t.Errorf("env = %+v", c.Env)
	}
	if js.Template.Spec.Volumes[0].ConfigMap.Name != "bot-config" || *js.Template.Spec.AutomountServiceAccountToken {
		t.Errorf("pod = %+v", js.Template.Spec)
	}

	rj := testRetentionJob()
	rj.Spec.Suspend, rj.Spec.DryRun = true, false
	rj.Spec.SuccessfulJobsHistoryLimit, rj.Spec.FailedJobsHistoryLimit = ptr.To[int32](0), ptr.To[int32](5)
	cj = specs.CronJob(rj, rt, "img:1")
	if !*cj.Spec.Suspend || *cj.Spec.SuccessfulJobsHistoryLimit != 0 || *cj.Spec.FailedJobsHistoryLimit != 5 {
		t.Errorf("pass-through = %+v", cj.Spec)
	}
	if cmd := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Command; slices.Contains(cmd, "--dry-run") || slices.ContainsFunc(cmd, func(a string) bool { return strings.HasPrefix(a, "--duty") }) {
		t.Errorf("--dry-run without spec.dryRun, or --duty without spec.pacing: %v", cmd)
	}
	rj.Spec.Pacing = &memoryv1alpha1.PacingSpec{DutyPercent: ptr.To[int32](25), RowsPerSecond: ptr.To[int64](5000)}
	cmd := specs.CronJob(rj, rt, "img:1").Spec.JobTemplate.Spec.Template.Spec.Containers[0].Command
	if !slices.Contains(cmd, "--duty=0.25") || !slices.Contains(cmd, "--rows-per-second=5000") {
		t.Errorf("spec.pacing not passed on: %v", cmd)
	}
}

func TestRunNowJob(t *testing.T) {
	cj := specs.CronJob(testRetentionJob(), testRuntime(), "img")
	cj.UID = "cj-uid"
	j := specs.RunNowJob(cj, "now-1")
	if j.Name != naming.RunNowJobName("nightly-bot", "now-1") || !strings.HasPrefix(j.Name, "nightly-bot-") {
		t.Errorf("name = %s", j.Name)
	}
	if o := j.OwnerReferences; len(o) != 1 || o[0].Kind != "CronJob" || o[0].UID != "cj-uid" {
		t.Errorf("owner = %+v", o)
	}
	if j.Annotations[naming.AnnotationInstantiate] != "manual" || j.Labels[naming.LabelRetentionJob] != "nightly" {
		t.Errorf("metadata = %+v", j.ObjectMeta)
	}
	a, _ := json.Marshal(j.Spec)
	b, _ := json.Marshal(cj.Spec.JobTemplate.Spec)
	if string(a) != string(b) {
		t.Error("the Job's spec differs from the CronJob's template")
	}
}

func assertOwned(t *testing.T, m metav1.ObjectMeta, component string) {
	t.Helper()
	if m.Labels[naming.LabelComponent] != component || m.Labels[naming.LabelManagedBy] != "engram-operator" || m.Labels[naming.LabelInstance] != "bot" || m.Labels[naming.LabelRuntime] != "bot" || m.Labels[naming.LabelName] != "engram" {
		t.Errorf("labels of %s = %v", m.Name, m.Labels)
	}
	if len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Kind != "MemoryRuntime" || m.OwnerReferences[0].Name != "bot" || !*m.OwnerReferences[0].Controller {
		t.Errorf("owner references of %s = %+v", m.Name, m.OwnerReferences)
	}
}

func envByName(env []corev1.EnvVar) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range env {
		out[e.Name] = e
	}
	return out
}

// TestJobDefaults: job pods always have a deadline and resources; the
// RetentionJob's own values replace the defaults.
func TestJobDefaults(t *testing.T) {
	rt := testRuntime()
	rj := testRetentionJob()
	rj.Spec.ActiveDeadlineSeconds = nil
	js := specs.CronJob(rj, rt, "img:1").Spec.JobTemplate.Spec
	if js.ActiveDeadlineSeconds == nil || *js.ActiveDeadlineSeconds != specs.DefaultJobActiveDeadlineSeconds {
		t.Errorf("activeDeadlineSeconds = %v, want the default %d", js.ActiveDeadlineSeconds, specs.DefaultJobActiveDeadlineSeconds)
	}
	res := js.Template.Spec.Containers[0].Resources
	if res.Requests.Cpu().String() != "100m" || res.Requests.Memory().String() != "128Mi" || res.Limits.Memory().String() != "512Mi" || !res.Limits.Cpu().IsZero() {
		t.Errorf("default resources = %+v", res)
	}
	rj.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}
	res = specs.CronJob(rj, rt, "img:1").Spec.JobTemplate.Spec.Template.Spec.Containers[0].Resources
	if res.Limits.Memory().String() != "2Gi" || len(res.Requests) != 1 || res.Requests.StorageEphemeral().String() != "64Mi" {
		t.Errorf("resources from the spec = %+v, want them and the ephemeral-storage default", res)
	}
}

// The limits of spec.service.limits reach the service as flags; absent ones
// are the defaults, the same as `manager serve`'s.
func TestDeploymentCarriesRateLimits(t *testing.T) {
	rt := testRuntime()
	rt.Spec.Service.Limits = &memoryv1alpha1.ServiceLimits{LLMRateLimit: &memoryv1alpha1.RateLimit{RequestsPerMinute: 6, Burst: 3}}
	cmd := specs.Deployment(rt, "img", "hash").Spec.Template.Spec.Containers[0].Command
	for _, want := range []string{"--rate-limit-per-minute=6000", "--rate-limit-burst=200", "--llm-rate-limit-per-minute=6", "--llm-rate-limit-burst=3"} {
		if !slices.Contains(cmd, want) {
			t.Errorf("command %v lacks %s", cmd, want)
		}
	}
	if d := memoryv1alpha1.DefaultRateLimit; d.RequestsPerMinute != int32(server.DefaultRateLimit.PerMinute) || d.Burst != int32(server.DefaultRateLimit.Burst) {
		t.Errorf("the CRD's default rate limit %+v differs from manager serve's %+v", d, server.DefaultRateLimit)
	}
	if d := memoryv1alpha1.DefaultLLMRateLimit; d.RequestsPerMinute != int32(server.DefaultLLMRateLimit.PerMinute) || d.Burst != int32(server.DefaultLLMRateLimit.Burst) {
		t.Errorf("the CRD's default LLM rate limit %+v differs from manager serve's %+v", d, server.DefaultLLMRateLimit)
	}
}

// TestDeploymentCarriesInflightPerCredential: spec.service.limits.
// maxInflightPerCredential reaches the service as its flag; absent, the
// default, the same as `manager serve`'s, and within the CRD's 1..64,
// which is manager serve's --max-inflight.
func TestDeploymentCarriesInflightPerCredential(t *testing.T) {
	rt := testRuntime()
	if cmd := specs.Deployment(rt, "img", "hash").Spec.Template.Spec.Containers[0].Command; !slices.Contains(cmd, "--max-inflight-per-credential=16") {
		t.Errorf("command %v lacks the default --max-inflight-per-credential=16", cmd)
	}
	rt.Spec.Service.Limits = &memoryv1alpha1.ServiceLimits{MaxInflightPerCredential: 48}
	if cmd := specs.Deployment(rt, "img", "hash").Spec.Template.Spec.Containers[0].Command; !slices.Contains(cmd, "--max-inflight-per-credential=48") {
		t.Errorf("command %v lacks --max-inflight-per-credential=48", cmd)
	}
	if d := memoryv1alpha1.DefaultMaxInflightPerCredential; int(d) != server.DefaultMaxInflightPerCredential {
		t.Errorf("the CRD's default of maxInflightPerCredential %d differs from manager serve's %d", d, server.DefaultMaxInflightPerCredential)
	}
	if server.DefaultMaxInflight != 64 {
		t.Errorf("manager serve's --max-inflight default is %d: the CRD bounds maxInflightPerCredential by 64", server.DefaultMaxInflight)
	}
}
