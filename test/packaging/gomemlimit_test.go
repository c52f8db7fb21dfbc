package packaging

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestChartSetsGOMEMLIMIT (issue 26, the worst case under the operator's
// memory limit): the chart set no GOMEMLIMIT, so the Go heap could grow
// to twice its live set before a collection, past the 512Mi limit. The
// operator's container now gets 90% of its memory limit (a limit in Mi or
// Gi), or the limit itself in any other form.
func TestChartSetsGOMEMLIMIT(t *testing.T) {
	helm := testenv.Binary(t, "ENGRAM_HELM", "make test builds helm into ./bin and sets ENGRAM_HELM")
	root := testenv.RepoRoot()
	for _, c := range []struct {
		set, value string // value "": from the limit (resourceFieldRef)
	}{
		{"", "460MiB"},
		{"resources.limits.memory=1Gi", "921MiB"},
		{"resources.limits.memory=1000M", ""},
	} {
		args := []string{"template", "engram", "charts/engram", "--namespace", namespace}
		if c.set != "" {
			args = append(args, "--set", c.set)
		}
		env := memLimitEnv(t, operatorDeployment(t, decode(t, run(t, root, helm, args...))))
		switch {
		case env == nil:
			t.Errorf("values %q: the manager container has no GOMEMLIMIT", c.set)
		case c.value != "" && env.Value != c.value:
			t.Errorf("values %q: GOMEMLIMIT %q, want %q", c.set, env.Value, c.value)
		case c.value == "" && (env.ValueFrom == nil || env.ValueFrom.ResourceFieldRef == nil ||
			env.ValueFrom.ResourceFieldRef.Resource != "limits.memory" || env.ValueFrom.ResourceFieldRef.ContainerName != "manager"):
			t.Errorf("values %q: GOMEMLIMIT %+v, want the manager's limits.memory", c.set, env)
		}
	}
}

// memLimitEnv is the GOMEMLIMIT variable of the manager container, or nil.
func memLimitEnv(t *testing.T, d *appsv1.Deployment) *corev1.EnvVar {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "manager" {
			continue
		}
		for i := range c.Env {
			if c.Env[i].Name == "GOMEMLIMIT" {
				return &c.Env[i]
			}
		}
	}
	return nil
}
