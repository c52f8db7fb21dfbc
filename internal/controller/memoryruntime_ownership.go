package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// runtimeOwnerRef is the controller owner reference every object of rt carries.
func runtimeOwnerRef(rt *memoryv1alpha1.MemoryRuntime) metav1.OwnerReference {
	return *metav1.NewControllerRef(rt, memoryv1alpha1.GroupVersion.WithKind("MemoryRuntime"))
}

// ownedName is one object a runtime owns, by kind and name.
type ownedName struct {
	kind string
	name string
	obj  client.Object // an empty object of the kind, to read into
}

// ownedNames are the objects the operator will write for rt.
func ownedNames(rt *memoryv1alpha1.MemoryRuntime) []ownedName {
	names := []ownedName{
		{"Secret", naming.CredentialsSecretName(rt.Name), &corev1.Secret{}},
		{"Secret", naming.APITokenSecretName(rt.Name), &corev1.Secret{}},
		{"ConfigMap", naming.ConfigMapName(rt.Name), &corev1.ConfigMap{}},
		{"Deployment", naming.DeploymentName(rt.Name), &appsv1.Deployment{}},
		{"Service", naming.ServiceName(rt.Name), &corev1.Service{}},
	}
	if rt.NetworkPolicyEnabled() {
		names = append(names, ownedName{"NetworkPolicy", specs.NetworkPolicyName(rt.Name), &networkingv1.NetworkPolicy{}})
	}
	if rt.PodDisruptionBudgetWanted() {
		names = append(names, ownedName{"PodDisruptionBudget", naming.PodDisruptionBudgetName(rt.Name), &policyv1.PodDisruptionBudget{}})
	}
	return names
}

// checkOwnership refuses, before anything is done in the database, a
// runtime whose object names are taken by objects Engram did not create.
// The apply of each object checks again (applier.apply); checking first
// keeps the database untouched too: without it a foreign <name>-db Secret
// would look like a hand-edited password and cost a password rotation on
// every retry. On a Ready runtime every object is in the cache, so this
// phase costs no API request; only objects the cache does not hold (not
// created yet, or foreign) are read from the API server.
func (r *MemoryRuntimeReconciler) checkOwnership(ctx context.Context, s *runtimeScope) (bool, error) {
	owner := runtimeOwnerRef(s.rt)
	for _, o := range ownedNames(s.rt) {
		key := client.ObjectKey{Namespace: s.rt.Namespace, Name: o.name}
		found, err := readLive(ctx, r.client, r.reader, key, o.obj)
		if err != nil {
			return false, fmt.Errorf("reading %s %s: %w", o.kind, o.name, err)
		}
		if !found {
			continue
		}
		if err := checkOwned(o.kind, o.obj, owner); err != nil {
			return false, err
		}
	}
	return false, nil
}

// refuse reports a refused object: Ready=False with reason ObjectNotOwned,
// a Warning event when that is news (not on every retry: an event is an
// API write), and a look again after NotOwnedRetry. before is the Ready
// condition the reconcile started with.
func (r *MemoryRuntimeReconciler) refuse(s *runtimeScope, before *metav1.Condition, refused *notOwnedError) {
	msg := refused.Error()
	// It replaces the ApplyFailed an apply may have recorded for the same refusal.
	s.facts.blocked = &blocker{cond: memoryv1alpha1.ConditionReady, reason: memoryv1alpha1.ReasonObjectNotOwned, message: msg}
	if before == nil || before.Reason != memoryv1alpha1.ReasonObjectNotOwned || before.Message != msg {
		r.eventer().warning(s.rt, memoryv1alpha1.ReasonObjectNotOwned, "Apply", "%s", msg)
	}
	s.requeue.at(r.opts.NotOwnedRetry)
}
