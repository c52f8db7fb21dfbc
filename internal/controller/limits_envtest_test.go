package controller

import (
	"errors"
	"fmt"
	"testing"
	"time"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/memory"
)

// scenarioResponseByteCap: spec.service.limits.maxResponseBytes reaches the
// service's config (the <runtime>-config ConfigMap the service reads), and
// changing it rolls the pods (a new pod template hash); removing it goes
// back to the engine's default.
func scenarioResponseByteCap(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "bytecap")
	rt := newRuntime(ns, "bot", "")
	rt.Spec.Service.Limits = &memoryv1alpha1.ServiceLimits{MaxResponseBytes: 256 << 10}
	e.readyRuntime(t, rt)
	if got := e.serviceConfig(t, ns, "bot").MaxResponseBytes; got != 256<<10 {
		t.Fatalf("config maxResponseBytes = %d, want %d", got, 256<<10)
	}
	before := e.templateHash(t, ns, "bot")
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Service.Limits.MaxResponseBytes = 4 << 20 })
	eventually(t, "the new cap reaches the config and the pod template", 20*time.Second, func() error {
		if got := e.serviceConfig(t, ns, "bot").MaxResponseBytes; got != 4<<20 {
			return fmt.Errorf("config maxResponseBytes = %d", got)
		}
		if e.templateHash(t, ns, "bot") == before {
			return errors.New("the pod template hash did not change")
		}
		return nil
	})
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Service.Limits = nil })
	eventually(t, "without limits the config takes the default", 20*time.Second, func() error {
		if got := e.serviceConfig(t, ns, "bot").MaxResponseBytes; got != 0 {
			return fmt.Errorf("config maxResponseBytes = %d, want 0 (the default, %d)", got, memory.DefaultMaxResponseBytes)
		}
		return nil
	})
}
