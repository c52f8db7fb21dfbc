package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// Issue 26's sixteenth review, MEDIUM 1: a MemoryPolicy the cache keeps
// without its spec (over maxEngramHeldBytes) resolved, from its empty spec,
// to the built-in defaults, and the runtime's config was rewritten with
// them (its categories, redaction and owner cap lost). It is refused now,
// and the running config kept.
func TestRuntimePolicyRefusesAPolicyKeptWithoutItsSpec(t *testing.T) {
	kept := &memoryv1alpha1.MemoryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "a",
		Annotations: map[string]string{naming.AnnotationSpecOverBound: "70000"}}}
	if _, reason, msg := runtimePolicy("team", kept); reason != memoryv1alpha1.ReasonSpecTooLarge || !strings.Contains(msg, "the running config is kept") {
		t.Errorf("a policy kept without its spec: %q %q, want SpecTooLarge and the running config kept", reason, msg)
	}
	// The same empty spec without the mark is a policy of defaults: the mark
	// is what tells them apart.
	whole := kept.DeepCopy()
	whole.Annotations = nil
	if _, reason, msg := runtimePolicy("team", whole); reason != "" {
		t.Errorf("an empty policy: %q %q, want it resolved", reason, msg)
	}
}
