package specs

import (
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// Shutdown of the memory service pods: on SIGTERM the service fails
// /readyz and keeps serving for the delay (endpoints drop the pod), then
// finishes in-flight requests within the timeout; the grace period covers
// both with a margin, so the kubelet never kills a request mid-way.
const (
	ServiceShutdownDelay    = 5 * time.Second
	ServiceShutdownTimeout  = 25 * time.Second
	ServiceTerminationGrace = ServiceShutdownDelay + ServiceShutdownTimeout + 5*time.Second
)

var tmpSizeLimit = resource.MustParse("64Mi")

// Deployment is the memory service of a runtime. configHash goes on the pod
// template, so a change of config or credentials rolls the pods. extraEnv
// comes after the runtime's own variables (RerankKeyEnv: the policy's).
func Deployment(rt *memoryv1alpha1.MemoryRuntime, image, configHash string, extraEnv ...corev1.EnvVar) *appsv1.Deployment {
	port, metricsPort := rt.ServicePort(), rt.MetricsPort()
	labels := naming.RuntimeLabels(rt.Name, naming.ComponentService)
	portName, scheme := ServicePortName(rt), probeScheme(rt)
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: ownedMeta(rt, naming.DeploymentName(rt.Name), naming.ComponentService),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(rt.Replicas()),
			Selector: &metav1.LabelSelector{MatchLabels: naming.SelectorLabels(rt.Name)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      labels,
					Annotations: map[string]string{naming.AnnotationConfigHash: configHash},
				},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(int64(ServiceTerminationGrace.Seconds())),
					AutomountServiceAccountToken:  ptr.To(false),
					EnableServiceLinks:            ptr.To(false),
					SecurityContext:               podSecurityContext(),
					Containers: []corev1.Container{{
						Name:    naming.ContainerSvc,
						Image:   image,
						Command: serveCommand(rt),
						Ports: []corev1.ContainerPort{
							{Name: portName, ContainerPort: port, Protocol: corev1.ProtocolTCP},
							{Name: naming.MetricsPortName, ContainerPort: metricsPort, Protocol: corev1.ProtocolTCP},
						},
						Env: append(tenantEnv(rt), extraEnv...),
						LivenessProbe: &corev1.Probe{
							ProbeHandler:     httpGet("/healthz", portName, scheme),
							PeriodSeconds:    10,
							TimeoutSeconds:   2,
							FailureThreshold: 3,
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:     httpGet("/readyz", portName, scheme),
							PeriodSeconds:    5,
							TimeoutSeconds:   2,
							FailureThreshold: 3,
						},
						StartupProbe: &corev1.Probe{
							ProbeHandler:     httpGet("/healthz", portName, scheme),
							PeriodSeconds:    2,
							FailureThreshold: 30,
						},
						Resources:                withEphemeralStorage(rt.Spec.Service.Resources),
						SecurityContext:          containerSecurityContext(),
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						VolumeMounts: []corev1.VolumeMount{
							mount(volumeConfig, naming.ConfigDir),
							mount(volumeTokens, naming.TokensDir),
							mount(volumeTmp, "/tmp"),
						},
					}},
					Volumes: []corev1.Volume{
						configVolume(rt),
						{Name: volumeTokens, VolumeSource: corev1.VolumeSource{
							Secret: &corev1.SecretVolumeSource{SecretName: naming.APITokenSecretName(rt.Name)},
						}},
						tmpVolume(),
					},
				},
			},
		},
	}
	pod := &d.Spec.Template.Spec
	serviceScheduling(rt, pod)
	if secret := rt.TLSSecretName(); secret != "" {
		pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, mount(volumeTLS, naming.TLSDir))
		pod.Volumes = append(pod.Volumes, tlsVolume(secret))
	}
	return d
}

// rateLimitArgs are the flags of spec.service.limits (defaults included, so
// the pod template shows the limits in force): the rate limits and the
// requests in flight per credential.
func rateLimitArgs(rt *memoryv1alpha1.MemoryRuntime) []string {
	rl, llm := rt.RateLimitOrDefault(), rt.LLMRateLimitOrDefault()
	return []string{
		"--rate-limit-per-minute=" + strconv.Itoa(int(rl.RequestsPerMinute)),
		"--rate-limit-burst=" + strconv.Itoa(int(rl.Burst)),
		"--llm-rate-limit-per-minute=" + strconv.Itoa(int(llm.RequestsPerMinute)),
		"--llm-rate-limit-burst=" + strconv.Itoa(int(llm.Burst)),
		"--max-inflight-per-credential=" + strconv.Itoa(int(rt.MaxInflightPerCredentialOrDefault())),
	}
}

// serveCommand is the service container's command line.
func serveCommand(rt *memoryv1alpha1.MemoryRuntime) []string {
	cmd := []string{
		naming.BinaryPath, "serve",
		"--config=" + naming.ConfigPath,
		"--tokens-file=" + naming.TokensPath,
		"--signing-key-file=" + naming.SigningKeyPath,
		"--listen=:" + strconv.Itoa(int(rt.ServicePort())),
		"--metrics-listen=:" + strconv.Itoa(int(rt.MetricsPort())),
		"--shutdown-delay=" + ServiceShutdownDelay.String(),
		"--shutdown-timeout=" + ServiceShutdownTimeout.String(),
	}
	cmd = append(cmd, rateLimitArgs(rt)...)
	if rt.TLSSecretName() != "" {
		cmd = append(cmd, "--tls-cert-file="+naming.TLSCertPath, "--tls-key-file="+naming.TLSKeyPath)
	}
	return cmd
}

// ServicePortName names the service port: "https" when the service serves
// TLS, else "http". Service meshes and monitoring read the protocol from
// the name, and the API server's service proxy picks the port by it.
func ServicePortName(rt *memoryv1alpha1.MemoryRuntime) string {
	if rt.TLSSecretName() != "" {
		return naming.PortNameTLS
	}
	return naming.PortName
}

// probeScheme: the kubelet probes an HTTPS service over HTTPS (it does not
// verify the certificate).
func probeScheme(rt *memoryv1alpha1.MemoryRuntime) corev1.URIScheme {
	if rt.TLSSecretName() != "" {
		return corev1.URISchemeHTTPS
	}
	return ""
}

func httpGet(path, port string, scheme corev1.URIScheme) corev1.ProbeHandler {
	return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(port), Scheme: scheme}}
}

// Service exposes a runtime's memory service inside the cluster on spec.service.port.
func Service(rt *memoryv1alpha1.MemoryRuntime) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: ownedMeta(rt, naming.ServiceName(rt.Name), naming.ComponentService),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: naming.SelectorLabels(rt.Name),
			Ports: []corev1.ServicePort{{
				Name:       ServicePortName(rt),
				Port:       rt.ServicePort(),
				TargetPort: intstr.FromString(ServicePortName(rt)),
				Protocol:   corev1.ProtocolTCP,
			}},
		},
	}
}

// ServiceAvailability reads a Deployment's status the way `kubectl rollout
// status` does: available when the Available condition is True and at least
// one replica is available.
func ServiceAvailability(rt *memoryv1alpha1.MemoryRuntime, d *appsv1.Deployment) (ok bool, reason, message string) {
	want := rt.Replicas()
	if want == 0 {
		return false, memoryv1alpha1.ReasonScaledToZero, "spec.service.replicas is 0: no memory service pod runs"
	}
	if d == nil {
		return false, memoryv1alpha1.ReasonDeploying, "the Deployment does not exist yet"
	}
	// Serving is what Ready reports: at least one available replica. The
	// Deployment's own Available condition is not used, because with the
	// default strategy (maxUnavailable 25 %, rounded down) a scale-up from 1
	// to 3 replicas makes it False while the old pod still serves; the
	// rollout itself is reported by Reconciling.
	msg := fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, want)
	if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want {
		msg += "; a rollout is in progress"
	}
	if d.Status.AvailableReplicas > 0 {
		return true, memoryv1alpha1.ReasonMinimumReplicasAvailable, msg
	}
	return false, memoryv1alpha1.ReasonDeploying, msg
}
