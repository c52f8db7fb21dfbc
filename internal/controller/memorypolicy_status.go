package controller

import (
	"fmt"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// policyFacts is what one reconcile of a MemoryPolicy found.
type policyFacts struct {
	problem    string // why the policy is invalid; empty when valid
	categories int
	err        error
}

// derivePolicyStatus sets Valid, Stalled and observedGeneration from the facts.
func derivePolicyStatus(p *memoryv1alpha1.MemoryPolicy, f policyFacts) {
	if f.problem != "" {
		p.SetCondition(memoryv1alpha1.ConditionValid, false, memoryv1alpha1.ReasonInvalid, f.problem)
		p.SetStalled(memoryv1alpha1.ReasonInvalid, f.problem)
	} else {
		p.SetCondition(memoryv1alpha1.ConditionValid, true, memoryv1alpha1.ReasonValid,
			fmt.Sprintf("%d categories; runtimes referencing this policy use it", f.categories))
		p.SetStalled("", "")
	}
	if f.err == nil {
		p.MarkObserved()
	}
}
