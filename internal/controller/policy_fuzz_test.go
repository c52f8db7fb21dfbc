package controller

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/workload"
)

// FuzzResolvePolicy follows a MemoryPolicy the way the operator handles it:
// ResolvePolicy (CRD -> memory.Policy), the policy's Validate (the Valid
// condition), the service config YAML of the ConfigMap, and the service
// loading that YAML. It never panics; a refusal names the field; and a
// policy the operator accepts is one the service starts with, unchanged.
// (A halved ttl such as 99999h used to be written as 2999970m, which the
// service refused: the operator wrote a config that crash-looped the pods.)
func FuzzResolvePolicy(f *testing.F) {
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: "team"},
		Spec: validRuntimeSpec()}
	f.Fuzz(func(t *testing.T, name, ttl, halfLife string, priority int32, purge string,
		autoMerge, arbitration, vectorWeight, minDecay float64, maxTopK, defaultTopK int32, pattern, guard string) {
		spec := crdDefaults()
		spec.Categories = []memoryv1alpha1.CategorySpec{
			{Name: name, TTL: memoryv1alpha1.Duration(ttl), HalfLife: memoryv1alpha1.Duration(halfLife), Priority: ptr.To(priority)},
			{Name: "contextual", TTL: "30d"},
		}
		spec.Retention.PurgeInactiveAfter = memoryv1alpha1.Duration(purge)
		spec.Dedup.AutoMergeThreshold, spec.Dedup.ArbitrationThreshold = autoMerge, arbitration
		spec.Search.VectorWeight = ptr.To(vectorWeight)
		spec.Forgetting.MinDecayScore = ptr.To(minDecay)
		spec.Limits.MaxTopK, spec.Search.DefaultTopK = maxTopK, defaultTopK
		if pattern != "" {
			spec.Redaction.Patterns = []string{pattern}
		}
		spec.Redaction.InjectionGuard = memoryv1alpha1.InjectionGuardMode(guard)

		p, err := ResolvePolicy(&spec)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, "categories[0].") && !strings.Contains(msg, "retention.purgeInactiveAfter") {
				t.Fatalf("ResolvePolicy refused with %q, which names no field", msg)
			}
			return
		}
		if err := p.Validate(); err != nil {
			return // the Valid condition says why; the policy is never applied
		}
		yml, err := specs.MarshalServiceConfig(specs.ServiceConfig(rt, "engram_team_bot", p, "p", 1))
		if err != nil {
			t.Fatalf("a valid policy does not render: %v", err)
		}
		cfg, err := workload.ParseServiceConfigYAML(yml)
		if err != nil {
			t.Fatalf("the service refuses the config the operator wrote: %v\n%s", err, yml)
		}
		if !reflect.DeepEqual(normalize(cfg.Policy), normalize(p)) {
			t.Fatalf("the service reads another policy:\nwrote %+v\nread  %+v", p, cfg.Policy)
		}
	})
}

// normalize makes nil and empty pattern lists equal (omitempty).
func normalize(p memory.Policy) memory.Policy {
	if len(p.Redaction.Patterns) == 0 {
		p.Redaction.Patterns = nil
	}
	return p
}
