package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/naming"
)

// patchStatus writes obj's status when it differs from orig's: once per
// reconcile, from a defer, so every phase may change the status freely and
// an unchanged status never costs a write. A merge patch of the status
// subresource sends only what changed; the object may be gone already (its
// finalizer was just removed), which is not an error.
func patchStatus[T client.Object](ctx context.Context, c client.Client, orig, obj T, status func(T) any) error {
	if equality.Semantic.DeepEqual(status(orig), status(obj)) {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, client.MergeFrom(orig), client.FieldOwner(naming.FieldOwner)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patching status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
