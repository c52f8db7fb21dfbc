package controller

import (
	"context"
	"fmt"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// reasonServerChanged (Normal event): the admin connection reaches another
// server identity, which holds the tenant's schema; recorded as its home.
const reasonServerChanged = "TenantServerChanged"

// checkConnection asks the server the admin connection reaches which
// server and database it is, and refuses one other than the tenant's
// (status.connection): provisioning there would create an empty tenant
// and give the service its credentials, with the data left behind. The
// refusal stops the reconcile before anything is written, so the service
// keeps its credentials for the server its data is on. A runtime without
// status.connection (new, or provisioned by an earlier release) records
// the one it is provisioned through (see recordConnection).
func (r *MemoryRuntimeReconciler) checkConnection(ctx context.Context, s *runtimeScope) (tenant.ServerIdentity, bool, error) {
	id, err := tenant.Identify(ctx, s.pool)
	if err != nil {
		return id, false, fmt.Errorf("asking the database server which it is: %w", err)
	}
	home := s.rt.Status.Connection
	if home == nil {
		return id, false, nil
	}
	recorded := tenant.ServerIdentity{System: home.SystemIdentifier, Database: home.Database, DatabaseOID: home.DatabaseOID}
	same := recorded.Same(id)
	if !(same && recorded.Verifiable(id)) && s.recorded != "" {
		// Not proven the same server: without a system identifier an OID
		// match may be another server (two fresh servers number their
		// first databases alike), and a server with another identifier may
		// hold the tenant's data all the same (pg_upgrade gives the
		// cluster a new system identifier; so does a logical restore or a
		// move made by hand). The data decides: the tenant's schema must
		// be there, as provisioning would take it (this runtime's UID
		// marker, or the adopt annotation's; a schema of that name alone
		// proves nothing: anyone may create one).
		has, err := tenant.HoldsTenant(ctx, s.pool, s.recorded, TenantOwner(s.rt), TenantClaim(s.rt, s.recorded, s.schema))
		if err != nil {
			return id, false, err
		}
		if has && !same {
			r.eventer().normal(s.rt, reasonServerChanged, "Provision",
				"the admin connection now reaches %s, where this tenant's schema %s is (a major upgrade, a restore or a move): recorded as the tenant's server", id, s.recorded)
		}
		same = has
	}
	if same {
		if id.System == "" {
			id.System = home.SystemIdentifier // the role lost the right to read it: keep what was proven
		}
		return id, false, nil
	}
	reason, what := memoryv1alpha1.ReasonDatabaseChanged,
		"the operator moves a tenant only when asked (its data would stay behind and the service would start on an empty schema), "+
			"so nothing is created there and the service keeps running on the old server: point the connection back at that server, "+
			"or set spec.database.onChange: Move to have the operator copy the tenant there and switch (docs/export.md, \"Moving a tenant to another server\")"
	if s.rt.Spec.Database.OnChange == memoryv1alpha1.OnChangeMove && home.Via == "" && !s.rt.UsesMemoryDatabase() {
		reason, what = memoryv1alpha1.ReasonMoveSourceUnknown,
			"onChange is Move, but this runtime has not recorded which connection reaches its tenant (status.connection.via, recorded since this release): "+
				"set spec.database back, let it reconcile once, then change it again; nothing was created there and the service keeps running on the old server"
	}
	msg := fmt.Sprintf("this tenant (schema %s) lives on %s (status.connection), and its admin connection, %s, now reaches %s; ",
		s.schema, recorded, connectionWhat(s.rt), id) + what
	r.warnOnce(s, reason, "Provision", msg)
	s.facts.block(memoryv1alpha1.ConditionDatabaseReady, reason, msg)
	// A human has to change the spec or the Secret (both are watched).
	s.requeue.at(r.opts.GrantCheckInterval)
	return id, true, nil
}

// recordConnection records id as the tenant's home once it is provisioned
// there, with the connection that reached it (connectionID: a move's
// source until it switches).
func recordConnection(rt *memoryv1alpha1.MemoryRuntime, id tenant.ServerIdentity) {
	via := connectionID(rt)
	rt.Status.Connection = &memoryv1alpha1.RuntimeConnection{SystemIdentifier: id.System, Database: id.Database, DatabaseOID: id.DatabaseOID, Via: via}
}

// connectionWhat names what chooses the runtime's server, for messages.
func connectionWhat(rt *memoryv1alpha1.MemoryRuntime) string {
	db := rt.Spec.Database
	switch {
	case rt.UsesMemoryDatabase():
		return "the Secret of MemoryDatabase " + rt.PlacedDatabase()
	case db.ClusterConnection != "":
		return "spec.database.clusterConnection " + db.ClusterConnection
	case db.ConnectionSecretRef != nil:
		return "spec.database.connectionSecretRef " + db.ConnectionSecretRef.Name
	}
	return "spec.database"
}
