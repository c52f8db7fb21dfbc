package controller

import (
	"context"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// reconcilePodDisruptionBudget keeps the runtime's PodDisruptionBudget
// while the service has more than one replica (and the budget is not
// turned off), and deletes the operator's own otherwise: with one replica
// a budget can only block a node drain, never keep the service up. Only the
// operator's own PodDisruptionBudget is ever deleted (same uid as its
// controller reference); the cache holds only labelled ones, so a runtime
// without one costs no API request.
func (r *MemoryRuntimeReconciler) reconcilePodDisruptionBudget(ctx context.Context, s *runtimeScope) (bool, error) {
	rt := s.rt
	if rt.PodDisruptionBudgetWanted() {
		return false, r.applyOwned(ctx, s, specs.PodDisruptionBudget(rt))
	}
	name := naming.PodDisruptionBudgetName(rt.Name)
	var live policyv1.PodDisruptionBudget
	found, err := getOptional(ctx, r.client, client.ObjectKey{Namespace: rt.Namespace, Name: name}, &live)
	if err != nil {
		return false, fmt.Errorf("reading PodDisruptionBudget %s: %w", name, err)
	}
	if !found || !metav1.IsControlledBy(&live, rt) {
		return false, nil
	}
	err = r.client.Delete(ctx, &live, client.Preconditions{UID: &live.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("deleting PodDisruptionBudget %s: %w", name, err)
	}
	r.eventer().changed(rt, &live, "PodDisruptionBudget", "Deleted", "deleted PodDisruptionBudget %s: %d replica(s) or spec.service.podDisruptionBudget.enabled is false", name, rt.Replicas())
	return false, nil
}
