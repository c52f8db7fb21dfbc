package controller

import (
	"fmt"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// Endpoint is the in-cluster URL of a runtime's memory service: https
// with spec.service.tls.
func Endpoint(rt *memoryv1alpha1.MemoryRuntime) string {
	scheme := "http"
	if rt.TLSSecretName() != "" {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s.%s.svc:%d", scheme, naming.ServiceName(rt.Name), rt.Namespace, rt.ServicePort())
}

// SchemaFor is the tenant schema of a runtime: spec.database.schema; else
// the schema its status already records (runtimes of earlier releases keep
// the name they were provisioned with); else the name derived from
// namespace and name. Which runtime may use a schema is decided by the UID
// marker in PostgreSQL, not by this name.
func SchemaFor(rt *memoryv1alpha1.MemoryRuntime) string {
	if rt.Spec.Database.Schema != "" {
		return rt.Spec.Database.Schema
	}
	if rt.Status.Schema != "" {
		return rt.Status.Schema
	}
	return tenant.SchemaName(rt.Namespace, rt.Name)
}

// TenantOwner is the ownership record of a runtime in PostgreSQL.
func TenantOwner(rt *memoryv1alpha1.MemoryRuntime) tenant.Owner {
	return tenant.Owner{UID: string(rt.UID), Namespace: rt.Namespace, Name: rt.Name}
}

// TenantClaim says when this runtime may take an existing schema that does
// not carry its UID: recorded, before this reconcile, in its own status
// (an upgrade from markers without UID), or named by the adopt annotation.
func TenantClaim(rt *memoryv1alpha1.MemoryRuntime, recordedSchema, schema string) tenant.Claim {
	return tenant.Claim{
		LegacySchema: recordedSchema != "" && recordedSchema == schema,
		AdoptFromUID: rt.Annotations[naming.AnnotationAdoptFromUID],
	}
}

// specConnectionID names the admin connection spec.database names, in the
// pool cache and in status.connection.via.
func specConnectionID(rt *memoryv1alpha1.MemoryRuntime) string {
	db := rt.Spec.Database
	if rt.UsesMemoryDatabase() || db.ConnectionSecretRef == nil && db.ClusterConnection == "" {
		return databaseConnID(rt.PlacedDatabase())
	}
	if db.ClusterConnection != "" {
		return "cluster/" + db.ClusterConnection
	}
	return "secret/" + rt.Namespace + "/" + db.ConnectionSecretRef.Name + "/" + db.ConnectionSecretRef.KeyOr(memoryv1alpha1.DefaultConnectionKey)
}

// connectionID names the admin connection a runtime's reconcile uses (one
// in the pool cache): spec.database's, except while the tenant is to be
// moved to the server spec.database names now (moveSourceVia): then the
// one it lives on, until the move switches.
func connectionID(rt *memoryv1alpha1.MemoryRuntime) string {
	if via := moveSourceVia(rt); via != "" {
		return via
	}
	return specConnectionID(rt)
}
