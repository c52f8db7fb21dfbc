package controller

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// MemoryPolicyReconciler reports whether a policy is valid and how many
// runtimes use it. (Runtimes pick up a policy's changes themselves: they
// watch policies.)
type MemoryPolicyReconciler struct {
	client client.Client
	events events.EventRecorder
	opts   Options
}

// Reconcile validates one MemoryPolicy and counts its runtimes.
func (r *MemoryPolicyReconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	p := &memoryv1alpha1.MemoryPolicy{}
	if done, err := readToReconcile(ctx, r.client, req, p, func(o *memoryv1alpha1.MemoryPolicy) any { return o.Status }); done {
		return doneResult(), err
	}
	orig := p.DeepCopy()
	var f policyFacts
	defer func() {
		f.err = retErr
		derivePolicyStatus(p, f)
		noteMetadataOverBound(p)
		retErr = errors.Join(retErr, patchStatus(ctx, r.client, orig, p, func(o *memoryv1alpha1.MemoryPolicy) any { return o.Status }))
	}()
	f.problem, f.categories = r.validate(p)
	return doneResult(), r.countBound(ctx, p)
}

// validate runs the checks CEL cannot do (memory.Policy.Validate: regular
// expressions that must compile, halfLife against ttl, ...) and returns the
// problem (empty: valid) and the number of categories. It records an event
// when validity changes.
func (r *MemoryPolicyReconciler) validate(p *memoryv1alpha1.MemoryPolicy) (problem string, categories int) {
	wasValid := p.GetCondition(memoryv1alpha1.ConditionValid)
	policy, err := ResolvePolicy(&p.Spec)
	if err == nil {
		err = policy.Validate()
	}
	if err != nil {
		msg := oneLine(err)
		if wasValid == nil || wasValid.Message != msg {
			eventer{rec: r.events}.warning(p, memoryv1alpha1.ReasonInvalid, "Validate", "%s", msg)
		}
		return msg, 0
	}
	if wasValid != nil && wasValid.Status != "True" {
		eventer{rec: r.events}.normal(p, memoryv1alpha1.ReasonValid, "Validate", "the policy is valid again")
	}
	return "", len(policy.Categories)
}

// countBound counts the runtimes whose spec.policyRef names this policy.
func (r *MemoryPolicyReconciler) countBound(ctx context.Context, p *memoryv1alpha1.MemoryPolicy) error {
	var list memoryv1alpha1.MemoryRuntimeList
	if err := r.client.List(ctx, &list, client.InNamespace(p.Namespace), client.MatchingFields{indexPolicyRef: p.Name}); err != nil {
		return fmt.Errorf("listing the runtimes of policy %q: %w", p.Name, err)
	}
	p.Status.BoundRuntimes = int32(len(list.Items))
	return nil
}

func (r *MemoryPolicyReconciler) setupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&memoryv1alpha1.MemoryPolicy{}).
		Watches(&memoryv1alpha1.MemoryRuntime{}, handler.EnqueueRequestsFromMapFunc(policyOfRuntime)).
		WithOptions(controllerOptions(r.opts.PolicyConcurrency, rateLimiter(r.opts))).
		Complete(r)
}

// policyOfRuntime maps a runtime to the policy it references (old and new
// objects of an update are both mapped, so a changed reference updates both counts).
func policyOfRuntime(_ context.Context, obj client.Object) []reconcile.Request {
	rt, ok := obj.(*memoryv1alpha1.MemoryRuntime)
	if !ok || rt.PolicyName() == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: rt.Namespace, Name: rt.PolicyName()}}}
}
