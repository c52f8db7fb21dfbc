package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// observedDBReady says whether DatabaseReady is True: as this process last
// wrote it when it knows, else as the runtime read from the cache says.
//
// A runtime's next reconcile may read it from a cache that has not seen
// the status the last one wrote yet. A new runtime's second reconcile
// comes right after its first (queue_priority.go), and often found no
// DatabaseReady at all: it provisioned the tenant a second time, a whole
// pass in PostgreSQL for nothing (291 provisionings for 200 runtimes in
// the benchmark). The status only this operator writes, so what it wrote
// last is the newest there is; a restarted operator knows nothing and
// reads the cache.
func observedDBReady(rt *memoryv1alpha1.MemoryRuntime, mem runtimeState) bool {
	if mem.dbReady != "" {
		return mem.dbReady == metav1.ConditionTrue
	}
	c := rt.GetCondition(memoryv1alpha1.ConditionDatabaseReady)
	return c != nil && c.Status == metav1.ConditionTrue
}

// rememberDBReady records the DatabaseReady of rt once its status patch
// (whose error is perr) is done: what it says when the patch succeeded,
// unknown when it failed (the cache then decides again). A runtime being
// deleted is not remembered: its deletion forgets it (reconcileDelete).
func (r *MemoryRuntimeReconciler) rememberDBReady(rt *memoryv1alpha1.MemoryRuntime, perr error) {
	if !rt.DeletionTimestamp.IsZero() {
		return
	}
	var st metav1.ConditionStatus
	if c := rt.GetCondition(memoryv1alpha1.ConditionDatabaseReady); perr == nil && c != nil {
		st = c.Status
	}
	r.memory.update(rt.UID, func(s *runtimeState) { s.dbReady = st })
}

// reassertReady, when provisioning is skipped because this process knows
// the tenant ready, states DatabaseReady=True again as it last wrote it.
// The runtime read may come from a cache that has not seen that status
// yet; the reconcile's status patch replaces the whole conditions list, so
// without it the stale list went back over the written one and the
// runtime lost DatabaseReady until the next grant check (TestPlugin's
// databases: a runtime placed and provisioned in its first reconcile had
// no DatabaseReady minutes later).
func reassertReady(s *runtimeScope, mem runtimeState) {
	if mem.dbReady != metav1.ConditionTrue || mem.provisioned == "" {
		return
	}
	s.facts.provisioned = mem.provisioned
	s.rt.Status.Schema = s.schema
	s.rt.Status.SchemaVersion = int32(mem.schemaVersion)
}
