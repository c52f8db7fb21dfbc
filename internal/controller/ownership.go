package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/naming"
)

// Engram never takes over an object it did not create. Server-side apply
// with force would silently overwrite a Service, Secret or CronJob that
// happens to have the name Engram wants (someone else's, or one planted to
// be adopted), so every apply first checks the live object. An object is
// Engram's only when it carries BOTH
//
//   - the label app.kubernetes.io/managed-by=engram-operator, and
//   - a controller owner reference with the UID of the object it belongs to
//     (the MemoryRuntime, the RetentionJob, or for a run-now Job the CronJob).
//
// The label alone can be set by anyone who can create objects in the
// namespace; the UID ties the object to this very owner (not to an earlier
// runtime of the same name). Objects lacking either are refused: nothing is
// written, the owner reports reason ObjectNotOwned and a Warning event, and
// the operator looks again later (refusedRetry).

// notOwnedError says that an object with the name Engram wants exists and is
// not Engram's. It is not a failure to retry with backoff: a human has to
// delete or rename the object.
type notOwnedError struct {
	kind, namespace, name string
	owner                 string   // "MemoryRuntime team-a/bot (uid ...)"
	missing               []string // what the object lacks
}

func (e *notOwnedError) Error() string {
	return fmt.Sprintf("%s %s/%s exists but was not created by Engram for %s: it lacks %s; Engram does not overwrite it: delete or rename it",
		e.kind, e.namespace, e.name, e.owner, strings.Join(e.missing, " and "))
}

// asNotOwned returns the notOwnedError in err's chain, or nil.
func asNotOwned(err error) *notOwnedError {
	var e *notOwnedError
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// checkOwned returns a notOwnedError unless live is Engram's object for
// owner (the controller reference the operator would set).
func checkOwned(kind string, live client.Object, owner metav1.OwnerReference) error {
	var missing []string
	if live.GetLabels()[naming.LabelManagedBy] != naming.ManagedBy {
		missing = append(missing, fmt.Sprintf("the label %s=%s", naming.LabelManagedBy, naming.ManagedBy))
	}
	ctrl := metav1.GetControllerOfNoCopy(live)
	switch {
	case ctrl == nil:
		missing = append(missing, fmt.Sprintf("a controller owner reference to %s %s", owner.Kind, owner.Name))
	case ctrl.UID != owner.UID:
		missing = append(missing, fmt.Sprintf("a controller owner reference to %s %s with uid %s (its controller is %s %s, uid %s%s)",
			owner.Kind, owner.Name, owner.UID, ctrl.Kind, ctrl.Name, ctrl.UID, staleOwnerHint(ctrl, owner)))
	}
	if len(missing) == 0 {
		return nil
	}
	return &notOwnedError{
		kind: kind, namespace: live.GetNamespace(), name: live.GetName(),
		owner:   fmt.Sprintf("%s %s/%s (uid %s)", owner.Kind, live.GetNamespace(), owner.Name, owner.UID),
		missing: missing,
	}
}

// staleOwnerHint explains the common harmless case: an object left by a
// deleted owner of the same name, which the garbage collector removes soon.
func staleOwnerHint(ctrl *metav1.OwnerReference, owner metav1.OwnerReference) string {
	if ctrl.Kind == owner.Kind && ctrl.Name == owner.Name {
		return "; probably left by a deleted " + owner.Kind + " of the same name, which the garbage collector removes shortly"
	}
	return ""
}

// controllerRef is the controller owner reference of a desired object.
// Every builder sets one; an object without it is a bug, never applied.
func controllerRef(desired client.Object) (metav1.OwnerReference, error) {
	ref := metav1.GetControllerOfNoCopy(desired)
	if ref == nil || ref.UID == "" {
		return metav1.OwnerReference{}, fmt.Errorf("%T %s has no controller owner reference with a uid: refusing to apply it", desired, desired.GetName())
	}
	return *ref, nil
}

// readLive reads the object named like desired into live: from the cache
// first, and on a cache miss from the API server. The cache only holds
// objects labelled managed-by=engram-operator, so a foreign object of that
// name is invisible to it; asking the API server on a miss (that is, before
// a creation, which is rare) finds it, and idle reconciles, which always hit
// the cache, still cost no API request. found is false when neither has it.
func readLive(ctx context.Context, cached, uncached client.Reader, key client.ObjectKey, live client.Object) (found bool, err error) {
	err = cached.Get(ctx, key, live)
	if err == nil {
		return true, nil
	}
	if !apierrors.IsNotFound(err) {
		return false, err
	}
	if uncached == nil {
		return false, nil
	}
	err = uncached.Get(ctx, key, live)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
