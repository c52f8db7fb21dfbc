package controller

import (
	"context"
	"fmt"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// checkPlacedAdmission keeps a placement the operator did not make from
// being honoured. A placement is recorded in status.database, which anyone
// allowed to write the runtime's status subresource can write too: a
// status naming a database that does not admit the runtime's namespace
// (spec.allowedNamespaces) would skip placement and its admission. So,
// once per process and database, the operator checks the admission of the
// placed database again when it connects; one that no longer admits the
// namespace keeps the tenant only where the tenant's schema is (placed
// while admitted: a placed tenant is never cut off), and refuses to create
// it anywhere else. The schema counts only as provisioning would take it
// (this runtime's UID marker, or the adopt annotation's): a schema of that
// name made by someone else proves no placement.
func (r *MemoryRuntimeReconciler) checkPlacedAdmission(ctx context.Context, s *runtimeScope, db *memoryv1alpha1.MemoryDatabase) (bool, error) {
	if r.memory.get(s.rt.UID).admittedOn == db.Name {
		return false, nil
	}
	req := placementRequest{}
	found, err := namespaceOf(ctx, r.client, s.rt.Namespace, &req)
	if err != nil {
		return false, err
	}
	c := candidate{name: db.Name}
	c.admits, c.refused = admissionOf(db)
	why := "namespace " + s.rt.Namespace + " is not in the operator's cache yet"
	if found {
		why = c.refusal(req)
	}
	if why != "" {
		has, err := tenant.HoldsTenant(ctx, s.pool, s.schema, TenantOwner(s.rt), TenantClaim(s.rt, s.recorded, s.schema))
		if err != nil {
			return false, fmt.Errorf("looking for the tenant's schema on MemoryDatabase %s: %w", db.Name, err)
		}
		if !has {
			msg := fmt.Sprintf("status.database names MemoryDatabase %s, which %s, and this tenant's schema %s (with this runtime's ownership marker) is not there: "+
				"a placement the operator did not make (an edited status) is not honoured; remove status.database to have the runtime placed", db.Name, why, s.schema)
			s.facts.block(memoryv1alpha1.ConditionDatabaseReady, memoryv1alpha1.ReasonNamespaceNotAllowed, msg)
			s.requeue.at(placementRetry)
			return true, nil
		}
	}
	r.memory.update(s.rt.UID, func(st *runtimeState) { st.admittedOn = db.Name })
	return false, nil
}
