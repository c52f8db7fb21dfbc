package controller

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/controller/specs"
)

// reconcileNetworkPolicy keeps the runtime's NetworkPolicy as the spec says:
// applied while spec.service.networkPolicy.enabled is true (the default),
// deleted when it is turned off. Only the operator's own NetworkPolicy is
// ever deleted (same uid as its controller reference); the cache holds only
// labelled ones, so a turned-off runtime costs no API request.
func (r *MemoryRuntimeReconciler) reconcileNetworkPolicy(ctx context.Context, s *runtimeScope) (bool, error) {
	rt := s.rt
	if rt.NetworkPolicyEnabled() {
		return false, r.applyOwned(ctx, s, specs.NetworkPolicy(rt, r.opts.MetricsNamespaces))
	}
	var live networkingv1.NetworkPolicy
	found, err := getOptional(ctx, r.client, client.ObjectKey{Namespace: rt.Namespace, Name: specs.NetworkPolicyName(rt.Name)}, &live)
	if err != nil {
		return false, fmt.Errorf("reading NetworkPolicy %s: %w", specs.NetworkPolicyName(rt.Name), err)
	}
	if !found || !metav1.IsControlledBy(&live, rt) {
		return false, nil
	}
	err = r.client.Delete(ctx, &live, client.Preconditions{UID: &live.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("deleting NetworkPolicy %s: %w", live.Name, err)
	}
	r.eventer().changed(rt, &live, "NetworkPolicy", "Deleted", "deleted NetworkPolicy %s: spec.service.networkPolicy.enabled is false", live.Name)
	return false, nil
}
