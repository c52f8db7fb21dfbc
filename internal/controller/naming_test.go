package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
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
		got := naming.CronJobName(c.rj, c.runtime)
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
		if again := naming.CronJobName(c.rj, c.runtime); again != got {
			t.Errorf("CronJobName is not deterministic: %q then %q", got, again)
		}
	}
}

func TestRunNowJobNameFitsAndDependsOnValue(t *testing.T) {
	cron := naming.CronJobName(strings.Repeat("r", 40), strings.Repeat("m", 53))
	a, b := naming.RunNowJobName(cron, "2024-06-01"), naming.RunNowJobName(cron, "2024-06-02")
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
	if naming.RunNowJobName(cron, "2024-06-01") != a {
		t.Error("RunNowJobName is not deterministic")
	}
}

func TestDerivedRuntimeNamesFit(t *testing.T) {
	name := "a" + strings.Repeat("b", 52) // 53, the CRD's maximum
	for _, derived := range []string{naming.CredentialsSecretName(name), naming.APITokenSecretName(name), naming.ConfigMapName(name), naming.DeploymentName(name), naming.ServiceName(name)} {
		if errs := validation.IsDNS1123Label(derived); len(errs) > 0 {
			t.Errorf("%q: %v", derived, errs)
		}
	}
	for k, v := range naming.JobLabels(strings.Repeat("r", 40), name) {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("label %s=%q: %v", k, v, errs)
		}
	}
}

func TestLabelsFollowTheContract(t *testing.T) {
	l := naming.JobLabels("nightly", "bot")
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
	for k, v := range naming.SelectorLabels("bot") {
		if naming.RuntimeLabels("bot", naming.ComponentService)[k] != v {
			t.Errorf("selector label %s=%s is not on the pods", k, v)
		}
	}
}

func TestSchemaForAndEndpoint(t *testing.T) {
	rt := &memoryv1alpha1.MemoryRuntime{}
	rt.Namespace, rt.Name = "team-a", "support-bot"
	if got := SchemaFor(rt); got != "engram_team_a_support_bot_6daa5987" {
		t.Errorf("SchemaFor = %q", got)
	}
	rt.Spec.Database.Schema = "custom"
	if got := SchemaFor(rt); got != "custom" {
		t.Errorf("SchemaFor with spec.database.schema = %q", got)
	}
	rt.Spec.Service.Port = 9090
	if got := Endpoint(rt); got != "http://support-bot.team-a.svc:9090" {
		t.Errorf("Endpoint = %q", got)
	}
}

// TestSchemaForAndClaim: a runtime keeps the schema its status records
// (upgrades from the non-injective names), the legacy claim holds only for
// that recorded schema, and the adopt annotation is passed through as is
// (internal/tenant decides whether it matches the marker).
func TestSchemaForAndClaim(t *testing.T) {
	rt := &memoryv1alpha1.MemoryRuntime{}
	rt.Namespace, rt.Name, rt.UID = "team", "a-bot", "uid-1"
	fresh := SchemaFor(rt)
	if fresh != tenant.SchemaName("team", "a-bot") || fresh == tenant.LegacySchemaName("team", "a-bot") {
		t.Fatalf("SchemaFor(new runtime) = %q", fresh)
	}
	if c := TenantClaim(rt, "", fresh); c.LegacySchema || c.AdoptFromUID != "" {
		t.Errorf("a new runtime claims %+v", c)
	}
	rt.Status.Schema = tenant.LegacySchemaName("team", "a-bot")
	if got := SchemaFor(rt); got != rt.Status.Schema {
		t.Errorf("SchemaFor(upgraded runtime) = %q, want its recorded %q", got, rt.Status.Schema)
	}
	if c := TenantClaim(rt, rt.Status.Schema, rt.Status.Schema); !c.LegacySchema {
		t.Error("the recorded schema is not claimed as legacy")
	}
	if c := TenantClaim(rt, rt.Status.Schema, "engram_other"); c.LegacySchema {
		t.Error("a schema other than the recorded one is claimed as legacy")
	}
	rt.Spec.Database.Schema = "engram_explicit"
	if got := SchemaFor(rt); got != "engram_explicit" {
		t.Errorf("SchemaFor with spec.database.schema = %q", got)
	}
	rt.Annotations = map[string]string{naming.AnnotationAdoptFromUID: "uid-0"}
	if c := TenantClaim(rt, "", "engram_explicit"); c.AdoptFromUID != "uid-0" {
		t.Errorf("adopt annotation not passed: %+v", c)
	}
	if o := TenantOwner(rt); o.UID != "uid-1" || o.Runtime() != "team/a-bot" {
		t.Errorf("TenantOwner = %+v", o)
	}
	if naming.AnnotationAdoptFromUID != naming.AnnotationAdoptFromUID {
		t.Error("the adopt annotation is spelled differently in api/ and internal/tenant")
	}
}
