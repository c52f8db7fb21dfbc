package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// placer makes the placement decisions of the operator one at a time, and
// remembers the ones the cache does not show yet. Two runtimes placed at
// once must not both take a database's last slot: each decision counts
// the tenants of every database from the runtimes' status.database in the
// cache, plus the decisions this process made whose status write the cache
// has not delivered yet (reserved). A decision is forgotten once the cache
// shows it (or the runtime is gone). After a restart nothing is reserved,
// and nothing needs to be: a decision counts only once its status write
// succeeded, and the cache of a new process starts with every write.
type placer struct {
	mu       sync.Mutex
	reserved map[types.UID]string // runtime -> database
}

func newPlacer() *placer { return &placer{reserved: map[types.UID]string{}} }

// decide places the runtime uid with req, over the databases and runtimes
// of the cache, and reserves the slot it took until release or until the
// cache shows the runtime's status.database.
func (p *placer) decide(uid types.UID, req placementRequest, dbs []memoryv1alpha1.MemoryDatabase, runtimes []memoryv1alpha1.MemoryRuntime) placement {
	p.mu.Lock()
	defer p.mu.Unlock()
	tenants := p.usage(uid, runtimes)
	cands := make([]candidate, 0, len(dbs))
	for i := range dbs {
		cands = append(cands, candidateOf(&dbs[i], tenants[dbs[i].Name]))
	}
	got := place(req, cands)
	if got.database != "" {
		p.reserved[uid] = got.database
	}
	return got
}

// release forgets the decision for uid (its status write failed: the
// runtime is placed again on its next reconcile).
func (p *placer) release(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.reserved, uid)
}

// usage counts the tenants of each database, leaving out the runtime being
// placed, and forgets the reservations the cache has caught up with.
// Called with p.mu held.
func (p *placer) usage(placing types.UID, runtimes []memoryv1alpha1.MemoryRuntime) map[string]int64 {
	n := map[string]int64{}
	seen := map[types.UID]bool{}
	for i := range runtimes {
		rt := &runtimes[i]
		if rt.UID == placing {
			continue
		}
		seen[rt.UID] = true
		name := rt.PlacedDatabase()
		if name != "" {
			delete(p.reserved, rt.UID) // the cache shows the decision now
		} else {
			name = p.reserved[rt.UID]
		}
		if name != "" {
			n[name]++
		}
	}
	for uid := range p.reserved {
		if !seen[uid] && uid != placing {
			delete(p.reserved, uid) // the runtime is gone
		}
	}
	return n
}

// candidateOf is a MemoryDatabase as placement sees it.
func candidateOf(db *memoryv1alpha1.MemoryDatabase, tenants int64) candidate {
	// A database kept without its spec (too large to read) takes no new
	// tenant, as if cordoned: its capacity and cordon are unknown.
	_, unread := specOverBound(db)
	admits, refused := admissionOf(db)
	return candidate{
		name: db.Name, labels: db.Labels, reach: db.Reachability(), cordoned: db.Spec.Cordoned || unread,
		tenants: tenants, maxTenants: db.MaxTenants(), bytes: db.BytesUsed(), maxBytes: db.MaxBytes(),
		admits: admits, refused: refused,
	}
}

// placementRequestOf reads what the runtime asks for.
func placementRequestOf(rt *memoryv1alpha1.MemoryRuntime) (placementRequest, error) {
	if ref := rt.Spec.Database.DatabaseRef; ref != nil {
		return placementRequest{ref: ref.Name, what: "databaseRef " + ref.Name}, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(rt.Spec.Database.DatabaseSelector)
	if err != nil {
		return placementRequest{}, fmt.Errorf("spec.database.databaseSelector: %w", err)
	}
	what := "databaseSelector " + sel.String()
	if sel.Empty() {
		what = "an empty databaseSelector (every MemoryDatabase)"
	}
	return placementRequest{selector: sel, what: what}, nil
}

// reconcilePlacement decides, once, on which MemoryDatabase a runtime with
// databaseRef or databaseSelector lives, and records it in status.database
// before anything is created there. A recorded placement is never changed:
// a spec that names another database stops the reconcile (DatabaseChanged)
// instead of moving the tenant.
func (r *MemoryRuntimeReconciler) reconcilePlacement(ctx context.Context, s *runtimeScope) (bool, error) {
	rt := s.rt
	placed := rt.PlacedDatabase()
	if stop, msg := placementConflict(rt); stop {
		s.facts.block(memoryv1alpha1.ConditionDatabaseReady, memoryv1alpha1.ReasonDatabaseChanged, msg)
		return true, nil
	}
	if !rt.UsesMemoryDatabase() {
		return false, nil
	}
	if placed != "" {
		s.connID = databaseConnID(placed)
		return false, nil
	}
	req, err := placementRequestOf(rt)
	if err != nil {
		s.facts.block(memoryv1alpha1.ConditionDatabaseReady, memoryv1alpha1.ReasonNoDatabaseAvailable, err.Error())
		return true, nil
	}
	// The namespace's labels decide which databases admit the tenant
	// (spec.allowedNamespaces); a change of them reconciles the runtimes
	// of the namespace that wait (namespace_admission.go).
	if found, err := namespaceOf(ctx, r.client, rt.Namespace, &req); err != nil {
		return false, err
	} else if !found {
		s.facts.block(memoryv1alpha1.ConditionDatabaseReady, memoryv1alpha1.ReasonWaitingForDatabase,
			"namespace "+rt.Namespace+" is not in the operator's cache yet")
		s.requeue.at(placementRetry)
		return true, nil
	}
	var dbs memoryv1alpha1.MemoryDatabaseList
	if err := r.client.List(ctx, &dbs); err != nil {
		return false, fmt.Errorf("listing MemoryDatabases: %w", err)
	}
	var runtimes memoryv1alpha1.MemoryRuntimeList
	if err := r.client.List(ctx, &runtimes); err != nil {
		return false, fmt.Errorf("listing MemoryRuntimes: %w", err)
	}
	got := r.placer.decide(rt.UID, req, dbs.Items, runtimes.Items)
	if got.database == "" {
		// Wait: a database change (checked, reachable, uncordoned, more
		// capacity, a new one) reconciles the runtimes waiting for one.
		// The runtime also looks again every placementRetry: the change
		// reaches it through another kind's informer, and a wake-up lost
		// between the two caches must cost a retry, not the placement.
		s.facts.block(memoryv1alpha1.ConditionDatabaseReady, got.reason, got.message)
		s.requeue.at(placementRetry)
		return true, nil
	}
	if err := r.recordPlacement(ctx, s, got.database); err != nil {
		r.placer.release(rt.UID)
		return false, err
	}
	placements.WithLabelValues(got.database).Inc()
	r.eventer().normal(rt, memoryv1alpha1.ReasonPlaced, "Place", "%s", got.message)
	s.connID = databaseConnID(got.database)
	return false, nil
}

// placementRetry is how often a runtime waiting for a database places
// itself again without a database change (it writes nothing when nothing
// changed).
const placementRetry = 30 * time.Second

// placementConflict reports a spec that names another home than the one
// the tenant has: a databaseRef other than status.database, a connection
// Secret for a tenant placed on a MemoryDatabase, or a selector for a
// tenant provisioned through a connection Secret (which database holds it
// is not known; databaseRef says it).
func placementConflict(rt *memoryv1alpha1.MemoryRuntime) (bool, string) {
	placed := rt.PlacedDatabase()
	db := rt.Spec.Database
	switch {
	case placed != "" && !rt.UsesMemoryDatabase():
		return true, fmt.Sprintf("this tenant lives on MemoryDatabase %s, and spec.database now names a connection Secret; "+
			"the operator never moves a tenant: set spec.database.databaseRef back to %s", placed, placed)
	case placed != "" && db.DatabaseRef != nil && db.DatabaseRef.Name != placed:
		return true, fmt.Sprintf("this tenant lives on MemoryDatabase %s, and spec.database.databaseRef now names %s; "+
			"the operator never moves a tenant: set databaseRef back to %s", placed, db.DatabaseRef.Name, placed)
	case placed == "" && db.DatabaseSelector != nil && rt.Status.Schema != "":
		return true, fmt.Sprintf("this tenant (schema %s) was provisioned through a connection Secret, so a selector "+
			"cannot tell where it lives: name the MemoryDatabase that holds it with spec.database.databaseRef", rt.Status.Schema)
	}
	return false, ""
}

// recordPlacement writes status.database at once, in a status patch of its
// own: the decision must be durable before the tenant's schema is created
// on that database, or an operator that died in between could place the
// tenant again elsewhere and leave the schema behind. The reconcile's
// final status patch then has nothing left to send for it.
func (r *MemoryRuntimeReconciler) recordPlacement(ctx context.Context, s *runtimeScope, database string) error {
	placed := &memoryv1alpha1.RuntimeDatabase{Name: database}
	obj := s.orig.DeepCopy()
	obj.Status.Database = placed
	if err := r.client.Status().Patch(ctx, obj, client.MergeFrom(s.orig), client.FieldOwner(naming.FieldOwner)); err != nil {
		return fmt.Errorf("recording the placement on MemoryDatabase %s: %w", database, err)
	}
	s.orig.Status.Database = placed.DeepCopy()
	s.rt.Status.Database = placed.DeepCopy()
	// The final patch names the latest version (see ensureFinalizer).
	s.rt.ResourceVersion = obj.ResourceVersion
	return nil
}

// databaseConnID names the admin connection of a MemoryDatabase in the pool cache.
func databaseConnID(name string) string { return "database/" + name }

// connectDatabase resolves the admin connection of the MemoryDatabase the
// runtime is placed on. A database whose last check found it unreachable
// stops the reconcile with the database's own reason and message, and no
// connection attempt: the database's check is the one prober of a server,
// and its status change reconciles the runtimes placed there again.
func (r *MemoryRuntimeReconciler) connectDatabase(ctx context.Context, s *runtimeScope) (bool, error) {
	name := s.rt.PlacedDatabase()
	var db memoryv1alpha1.MemoryDatabase
	found, err := getOptional(ctx, r.client, client.ObjectKey{Name: name}, &db)
	if err != nil {
		return false, fmt.Errorf("reading MemoryDatabase %q: %w", name, err)
	}
	if !found {
		s.facts.block(memoryv1alpha1.ConditionDatabaseReady, memoryv1alpha1.ReasonDatabaseNotFound, fmt.Sprintf(
			"MemoryDatabase %s, where this tenant lives, does not exist: create it again (the operator never moves a tenant to another database)", name))
		return true, nil
	}
	if held, over := specOverBound(&db); over {
		s.facts.block(memoryv1alpha1.ConditionDatabaseReady, memoryv1alpha1.ReasonSpecTooLarge, fmt.Sprintf(
			"MemoryDatabase %s, where this tenant lives, holds about %d KiB, more than the operator reads (%d KiB): nothing is done for this tenant until it is shortened (see its Ready condition)",
			name, held>>10, maxEngramHeldBytes>>10))
		return true, nil
	}
	if db.Reachability() == metav1.ConditionFalse {
		c := db.GetCondition(memoryv1alpha1.ConditionReachable)
		msg := fmt.Sprintf("MemoryDatabase %s is unreachable: %s", name, c.Message)
		r.warnOnce(s, c.Reason, "Connect", msg)
		s.facts.block(memoryv1alpha1.ConditionDatabaseReady, c.Reason, msg)
		return true, nil
	}
	url, err := databaseURL(ctx, r.secrets, &db, r.opts.OperatorNamespace)
	if stop, err := r.useConnection(s, url, err, "MemoryDatabase "+name+": "); stop || err != nil {
		return stop, err
	}
	return r.checkPlacedAdmission(ctx, s, &db)
}

// warnOnce records a Warning event when the runtime enters a failure with
// reason, not on every reconcile while it lasts (see provision).
func (r *MemoryRuntimeReconciler) warnOnce(s *runtimeScope, reason, action, msg string) {
	var before string
	if c := s.orig.GetCondition(memoryv1alpha1.ConditionDatabaseReady); c != nil && c.Status == metav1.ConditionFalse {
		before = c.Reason
	}
	if before == reason || r.memory.get(s.rt.UID).warned == reason {
		return
	}
	r.eventer().warning(s.rt, reason, action, "%s", msg)
	r.memory.update(s.rt.UID, func(st *runtimeState) { st.warned = reason })
}
