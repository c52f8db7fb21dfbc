package controller

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// databaseFacts is what one check of a MemoryDatabase found.
type databaseFacts struct {
	// tenants placed there (nil: not counted, the status keeps its count).
	tenants *int32
	// info is what the database said (nil: not reached).
	info *tenant.ServerInfo
	// failure is why it was not reached (the Reachable=False reason).
	failure *blocker
	// err is an API error of the reconcile (retried with backoff).
	err error
}

// deriveDatabaseStatus sets the status of db from one check: Reachable,
// Reconciling or Stalled (the kstatus pair, as for runtimes: a reason in
// stalledReasons needs a human), what the server said, the tenant count.
// A failed check keeps what an earlier one found of the server (version,
// extensions, size): it is the last known state of a server that is away.
func deriveDatabaseStatus(db *memoryv1alpha1.MemoryDatabase, f databaseFacts) {
	if f.tenants != nil {
		db.Status.Tenants = *f.tenants
	}
	switch {
	case f.failure != nil:
		b := f.failure
		db.SetCondition(memoryv1alpha1.ConditionReachable, false, b.reason, b.message)
		if isStalled(b.reason) {
			db.SetStalled(b.reason, b.message)
			db.SetReconciling("", "")
		} else {
			db.SetReconciling(b.reason, b.message)
			db.SetStalled("", "")
		}
	case f.info != nil:
		recordServer(db, f.info)
		db.SetCondition(memoryv1alpha1.ConditionReachable, true, memoryv1alpha1.ReasonConnected, connectedMessage(f.info))
		db.SetReconciling("", "")
		db.SetStalled("", "")
	case f.err != nil:
		db.SetReconciling(memoryv1alpha1.ReasonReconcileError, oneLine(f.err))
	}
	if f.err == nil {
		db.MarkObserved()
	}
}

// recordServer copies what the server said into the status.
func recordServer(db *memoryv1alpha1.MemoryDatabase, info *tenant.ServerInfo) {
	st := &db.Status
	st.ServerVersion = info.Version
	st.Extensions = nil
	for _, e := range info.Extensions {
		st.Extensions = append(st.Extensions, memoryv1alpha1.DatabaseExtension{Name: e.Name, Version: e.Version})
	}
	st.Citus = nil
	if c := info.Citus; c != nil {
		st.Citus = &memoryv1alpha1.CitusStatus{Version: c.Version, Coordinator: c.Coordinator, Workers: c.Workers}
	}
	st.BytesUsed = bytesToRecord(st.BytesUsed, info.Bytes)
}

// connectedMessage is Reachable's message: what a platform engineer looks for first.
func connectedMessage(info *tenant.ServerInfo) string {
	parts := []string{"PostgreSQL " + info.Version}
	for _, e := range info.Extensions {
		if e.Name == "vector" {
			parts = append(parts, "pgvector "+e.Version)
		}
	}
	if c := info.Citus; c != nil {
		role := "not the coordinator"
		if c.Coordinator {
			role = fmt.Sprintf("coordinator of %d workers", len(c.Workers))
		}
		parts = append(parts, "Citus "+c.Version+" ("+role+")")
	}
	return strings.Join(parts, ", ")
}

// bytesHysteresis is the smallest change of a database's size that is
// written to the status: 1 % of it, at least 1 MiB. A database that is
// idle stays within it (autovacuum adds a visibility map page here and
// there), so its checks write nothing; one that grows is written about
// once per percent of growth.
func bytesHysteresis(recorded int64) int64 { return max(recorded/100, 1<<20) }

// bytesToRecord is the status.bytesUsed to write for a measured size: the
// recorded one while the size stays within the hysteresis, else the new
// size rounded down to whole MiB.
func bytesToRecord(recorded *resource.Quantity, measured int64) *resource.Quantity {
	if recorded != nil {
		old := recorded.Value()
		if d := measured - old; d < bytesHysteresis(old) && -d < bytesHysteresis(old) {
			return recorded
		}
	}
	return resource.NewQuantity(measured&^(1<<20-1), resource.BinarySI)
}

// stampLastCheck sets status.lastCheck to now when the check changed
// anything else of the status, and leaves it alone otherwise: a lastCheck
// that moved with every check would cost an API write per database per
// interval on an idle system.
func stampLastCheck(orig, db *memoryv1alpha1.MemoryDatabase, now time.Time) {
	a, b := orig.Status.DeepCopy(), db.Status.DeepCopy()
	a.LastCheck, b.LastCheck = nil, nil
	if equality.Semantic.DeepEqual(a, b) {
		return
	}
	t := metav1.NewTime(now.Truncate(time.Second))
	db.Status.LastCheck = &t
}
