package node

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// toolbox is a Pod of the client image (test/node/client) that the suite
// makes HTTP calls from, inside the cluster, with kubectl exec.
type toolbox struct {
	cl      *cluster
	ns, pod string
}

// toolbox starts a toolbox Pod in ns (restricted, like everything the
// suite runs) and deletes it when the test ends.
func (e *env) toolbox(t *testing.T, ns string) *toolbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "toolbox-" + randomHex(2), Namespace: ns, Labels: map[string]string{"app": "e2e-toolbox"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(int64(1)),
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(65535)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "client", Image: clientImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/client", "-serve"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if err := e.cl.c.Create(ctx, pod); err != nil {
		t.Fatalf("creating the toolbox Pod: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = e.cl.c.Delete(ctx, pod)
	})
	err := poll(ctx, 500*time.Millisecond, func() (bool, error) {
		if err := e.cl.c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return podReady(pod), nil
	})
	if err != nil {
		t.Fatalf("the toolbox Pod did not become Ready: %v\n%s", err, e.cl.describePods(ns))
	}
	return &toolbox{cl: e.cl, ns: ns, pod: pod.Name}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// errNoAnswer: the request got no HTTP answer (refused, timed out).
var errNoAnswer = errors.New("no answer")

// call runs the client in the toolbox with args (see test/node/client)
// and returns the HTTP status and body.
func (tb *toolbox) call(ctx context.Context, args ...string) (int, string, error) {
	cmd := exec.CommandContext(ctx, tb.cl.kubectlBin, append([]string{"--kubeconfig", tb.cl.kubeconfig,
		"-n", tb.ns, "exec", tb.pod, "--", "/client"}, args...)...)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		return 0, strings.TrimSpace(string(out)), fmt.Errorf("%w: %s", errNoAnswer, strings.TrimSpace(string(out)))
	}
	if err != nil {
		msg := string(out)
		if errors.As(err, &exit) {
			msg += string(exit.Stderr)
		}
		return 0, "", fmt.Errorf("kubectl exec %s: %w: %s", tb.pod, err, msg)
	}
	status, body, _ := strings.Cut(string(out), "\n")
	code, err := strconv.Atoi(strings.TrimSpace(status))
	if err != nil {
		return 0, "", fmt.Errorf("the client printed %q", out)
	}
	return code, strings.TrimSpace(body), nil
}
