package controller

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// A move to another server (spec.database.onChange: Move) is declared by
// naming another clusterConnection or connectionSecretRef in the spec; the
// connection the tenant lives on is then only in the status
// (status.connection.via, status.serverMove.from.via). Everything the
// normal pass does (provisioning, grants, the <runtime>-db Secret the
// service reads) keeps using that one until the move switches: the service
// never sees the target before its data is complete there.

// moveSourceVia is the connection the tenant lives on while spec.database
// names another one it is to be moved to: the move's source while a move
// runs (whatever spec.database says now: an abort needs the source), else
// status.connection.via when onChange is Move and spec.database names
// another connection. Empty when the runtime's reconcile uses the spec's.
// MemoryDatabase placements are not moved (v1).
func moveSourceVia(rt *memoryv1alpha1.MemoryRuntime) string {
	if rt.UsesMemoryDatabase() {
		return ""
	}
	if mv := rt.Status.ServerMove; mv != nil && memoryv1alpha1.ServerMoveRunning(mv.Phase) && mv.From.Via != "" {
		return mv.From.Via
	}
	if rt.Spec.Database.OnChange != memoryv1alpha1.OnChangeMove {
		return ""
	}
	if c := rt.Status.Connection; c != nil && c.Via != "" && c.Via != specConnectionID(rt) && movableVia(c.Via) {
		return c.Via
	}
	return ""
}

// moveTarget is the connection spec.database asks the tenant to be moved
// to: set when onChange is Move, the tenant's connection is recorded and
// spec.database names another (clusterConnection or connectionSecretRef).
func moveTarget(rt *memoryv1alpha1.MemoryRuntime) (string, bool) {
	if rt.UsesMemoryDatabase() || rt.Spec.Database.OnChange != memoryv1alpha1.OnChangeMove {
		return "", false
	}
	c := rt.Status.Connection
	spec := specConnectionID(rt)
	if c == nil || c.Via == "" || c.Via == spec || !movableVia(c.Via) || !movableVia(spec) {
		return "", false
	}
	return spec, true
}

// movableVia reports whether a connection is one a move may start from or
// go to: a clusterConnection or a connectionSecretRef (not a MemoryDatabase).
func movableVia(via string) bool {
	return strings.HasPrefix(via, "cluster/") || strings.HasPrefix(via, "secret/")
}

// viaDatabase is the spec.database that names the connection via (as
// connectionID names it) of rt.
func viaDatabase(rt *memoryv1alpha1.MemoryRuntime, via string) (memoryv1alpha1.DatabaseSpec, error) {
	db := rt.Spec.Database
	db.ClusterConnection, db.ConnectionSecretRef, db.DatabaseRef, db.DatabaseSelector = "", nil, nil, nil
	if name, ok := strings.CutPrefix(via, "cluster/"); ok && name != "" {
		db.ClusterConnection = name
		return db, nil
	}
	if rest, ok := strings.CutPrefix(via, "secret/"); ok {
		parts := strings.Split(rest, "/")
		// The namespace is the runtime's: a recorded connection never
		// reads a Secret of another namespace.
		if len(parts) == 3 && parts[0] == rt.Namespace && parts[1] != "" && parts[2] != "" {
			db.ConnectionSecretRef = &memoryv1alpha1.SecretKeySelector{Name: parts[1], Key: parts[2]}
			return db, nil
		}
	}
	return db, withReason(memoryv1alpha1.ReasonConnectionInvalid, "the recorded connection %q names no clusterConnection or Secret of namespace %s", via, rt.Namespace)
}

// viaPool opens (or takes from the cache) the admin pool of the connection
// via of rt, with its URL.
func (r serverMover) viaPool(ctx context.Context, rt *memoryv1alpha1.MemoryRuntime, via string) (*pgxpool.Pool, string, error) {
	db, err := viaDatabase(rt, via)
	if err != nil {
		return nil, "", err
	}
	url, err := databaseSpecURL(ctx, r.secrets, rt, db, r.opts.OperatorNamespace)
	if err != nil {
		return nil, "", fmt.Errorf("resolving the connection %s: %w", via, err)
	}
	pool, err := r.pools.get(via, url)
	if err != nil {
		return nil, url, withReasonIfNone(fmt.Errorf("connecting through %s: %w", via, err), memoryv1alpha1.ReasonConnectionInvalid)
	}
	return pool, url, nil
}

// serverMover carries out moves to another server for the runtime
// reconciler (its methods are the move's, apart from the reconciler's own).
type serverMover struct{ *MemoryRuntimeReconciler }
