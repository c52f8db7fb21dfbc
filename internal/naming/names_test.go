package naming

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestCronJobNameFits(t *testing.T) {
	long40 := strings.Repeat("r", 40)
	long53 := strings.Repeat("m", 53)
	cases := []struct {
		rj, runtime string
		want        string // "" = only check the limits
	}{
		{"nightly", "support-bot", "nightly-support-bot"},
		{long40, long53, ""},
		{long40, long53[:52] + "x", ""},
		{"a", strings.Repeat("b", 50), "a-" + strings.Repeat("b", 50)},
		{"a", strings.Repeat("b", 51), ""},
	}
	seen := map[string]string{}
	for _, c := range cases {
		got := CronJobName(c.rj, c.runtime)
		if c.want != "" && got != c.want {
			t.Errorf("CronJobName(%q, %q) = %q, want %q", c.rj, c.runtime, got, c.want)
		}
		if len(got) > 52 {
			t.Errorf("CronJobName(%q, %q) = %q has %d characters, more than 52", c.rj, c.runtime, got, len(got))
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("CronJobName(%q, %q) = %q: %v", c.rj, c.runtime, got, errs)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("CronJobName gives %q for both %s and %s/%s", got, other, c.rj, c.runtime)
		}
		seen[got] = c.rj + "/" + c.runtime
		if again := CronJobName(c.rj, c.runtime); again != got {
			t.Errorf("CronJobName is not deterministic: %q then %q", got, again)
		}
	}
}

func TestRunNowJobNameFitsAndDependsOnValue(t *testing.T) {
	cron := CronJobName(strings.Repeat("r", 40), strings.Repeat("m", 53))
	a, b := RunNowJobName(cron, "2024-06-01"), RunNowJobName(cron, "2024-06-02")
	for _, name := range []string{a, b} {
		if len(name) > 63 {
			t.Errorf("%q has %d characters, more than 63", name, len(name))
		}
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("%q: %v", name, errs)
		}
	}
	if a == b {
		t.Errorf("two run-now values give the same Job name %q", a)
	}
	if RunNowJobName(cron, "2024-06-01") != a {
		t.Error("RunNowJobName is not deterministic")
	}
}

func TestDerivedRuntimeNamesFit(t *testing.T) {
	name := "a" + strings.Repeat("b", 52) // 53, the CRD's maximum
	for _, derived := range []string{CredentialsSecretName(name), APITokenSecretName(name), ConfigMapName(name), DeploymentName(name), ServiceName(name)} {
		if errs := validation.IsDNS1123Label(derived); len(errs) > 0 {
			t.Errorf("%q: %v", derived, errs)
		}
	}
	for k, v := range JobLabels(strings.Repeat("r", 40), name) {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("label %s=%q: %v", k, v, errs)
		}
	}
}

func TestLabelsFollowTheContract(t *testing.T) {
	l := JobLabels("nightly", "bot")
	want := map[string]string{
		"app.kubernetes.io/name":          "engram",
		"app.kubernetes.io/instance":      "bot",
		"app.kubernetes.io/component":     "maintenance-job",
		"app.kubernetes.io/managed-by":    "engram-operator",
		"memory.engram.dev/runtime":       "bot",
		"memory.engram.dev/retention-job": "nightly",
	}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("label %s = %q, want %q", k, l[k], v)
		}
	}
	for k, v := range SelectorLabels("bot") {
		if RuntimeLabels("bot", ComponentService)[k] != v {
			t.Errorf("selector label %s=%s is not on the pods", k, v)
		}
	}
}
