package demo

import (
	"context"
	"fmt"
	"regexp"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// stalledGrace is how long a runtime may stay Stalled before the demo
// gives up waiting for it. Some stalls pass by themselves on a real
// cluster: the objects of a deleted runtime of the same name block the new
// one (ObjectNotOwned) until the garbage collector removes them, seconds
// later.
const stalledGrace = 20 * time.Second

// StalledError: the operator stopped on something only a person can fix
// (the runtime's Stalled condition); waiting longer would not help.
type StalledError struct {
	Runtime, Reason, Message string
}

func (e *StalledError) Error() string {
	return fmt.Sprintf("runtime %s is Stalled (%s): %s", e.Runtime, e.Reason, e.Message)
}

// adoptHint is how the operator names the UID of an earlier runtime of the
// same namespace and name whose schema is in PostgreSQL (SchemaOwnedByOther,
// internal/tenant): "set the annotation <adopt-from-uid>=<uid>".
var adoptHint = regexp.MustCompile(regexp.QuoteMeta(naming.AnnotationAdoptFromUID) + `=([0-9a-fA-F-]{36})`)

// checkStalled returns a StalledError when rt is Stalled, except for the
// one case the demo resolves itself when TakeOverEarlier is set: the
// memory store an earlier demo runtime of the same namespace and name left
// in PostgreSQL (make demo after make demo-node, or a node started
// afresh). The demo then takes it over the way a restore does, with the
// adopt-from-uid annotation; the operator still checks that the schema's
// marker carries exactly that UID and this namespace/name.
func (s *Scenario) checkStalled(ctx context.Context, rt *memoryv1alpha1.MemoryRuntime) error {
	c := apimeta.FindStatusCondition(rt.Status.Conditions, memoryv1alpha1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil
	}
	m := adoptHint.FindStringSubmatch(c.Message)
	if !s.TakeOverEarlier || c.Reason != memoryv1alpha1.ReasonSchemaOwnedByOther || m == nil {
		return &StalledError{Runtime: rt.Name, Reason: c.Reason, Message: c.Message}
	}
	uid := m[1]
	if rt.Annotations[naming.AnnotationAdoptFromUID] == uid {
		return nil // asked already; the operator has not caught up yet
	}
	s.printf("   the memory store of an earlier runtime %s/%s (UID %s) is in PostgreSQL:\n"+
		"   taking it over (annotation %s)\n", rt.Namespace, rt.Name, uid, naming.AnnotationAdoptFromUID)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, naming.AnnotationAdoptFromUID, uid)
	if err := s.Client.Patch(ctx, rt, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("annotating runtime %s to take over its earlier schema: %w", rt.Name, err)
	}
	return nil
}
