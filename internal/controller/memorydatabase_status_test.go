package controller

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// TestDeriveDatabaseStatus: how one check becomes the status of a
// MemoryDatabase, and which checks leave it exactly as it was (no write).
func TestDeriveDatabaseStatus(t *testing.T) {
	info := &tenant.ServerInfo{Version: "17.5", Bytes: 300 << 20,
		Extensions: []tenant.ExtensionInfo{{Name: "plpgsql", Version: "1.0"}, {Name: "vector", Version: "0.8.0"}}}
	citus := &tenant.ServerInfo{Version: "17.5", Bytes: 1 << 30, Extensions: []tenant.ExtensionInfo{{Name: "citus", Version: "13.2-1"}},
		Citus: &tenant.CitusInfo{Version: "13.2-1", Coordinator: true, Workers: []string{"10.0.0.1:5432", "10.0.0.2:5432"}}}
	type want struct {
		reachable, reason, reconciling, stalled string
		observed                                bool
	}
	cases := []struct {
		name string
		f    databaseFacts
		want want
	}{
		{"reached", databaseFacts{tenants: ptr.To[int32](3), info: info}, want{"True", "Connected", "", "", true}},
		{"a Citus coordinator", databaseFacts{info: citus}, want{"True", "Connected", "", "", true}},
		{"down: InProgress, it may come back", databaseFacts{failure: &blocker{reason: memoryv1alpha1.ReasonDatabaseUnreachable, message: "refused"}},
			want{"False", "DatabaseUnreachable", "DatabaseUnreachable", "", true}},
		{"credentials refused: Failed, a human has to fix the Secret", databaseFacts{failure: &blocker{reason: memoryv1alpha1.ReasonConnectionInvalid, message: "password"}},
			want{"False", "ConnectionInvalid", "", "ConnectionInvalid", true}},
		{"no Secret yet: InProgress", databaseFacts{failure: &blocker{reason: memoryv1alpha1.ReasonConnectionSecretNotFound, message: "none"}},
			want{"False", "ConnectionSecretNotFound", "ConnectionSecretNotFound", "", true}},
		{"API error: the verdict stays", databaseFacts{err: errors.New("etcd")}, want{"", "", "ReconcileError", "", false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := &memoryv1alpha1.MemoryDatabase{}
			d.Generation = 4
			deriveDatabaseStatus(d, c.f)
			var got want
			if r := d.GetCondition(memoryv1alpha1.ConditionReachable); r != nil {
				got.reachable, got.reason = string(r.Status), r.Reason
			}
			if r := d.GetCondition(memoryv1alpha1.ConditionReconciling); r != nil {
				got.reconciling = r.Reason
			}
			if r := d.GetCondition(memoryv1alpha1.ConditionStalled); r != nil {
				got.stalled = r.Reason
			}
			got.observed = d.Status.ObservedGeneration == 4
			if got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}

	t.Run("what the server said", func(t *testing.T) {
		d := &memoryv1alpha1.MemoryDatabase{}
		deriveDatabaseStatus(d, databaseFacts{tenants: ptr.To[int32](2), info: citus})
		st := d.Status
		if st.ServerVersion != "17.5" || st.Tenants != 2 || st.BytesUsed.String() != "1Gi" || len(st.Extensions) != 1 ||
			st.Citus == nil || !st.Citus.Coordinator || len(st.Citus.Workers) != 2 {
			t.Errorf("status %+v", st)
		}
		if msg := d.GetCondition(memoryv1alpha1.ConditionReachable).Message; msg != "PostgreSQL 17.5, Citus 13.2-1 (coordinator of 2 workers)" {
			t.Errorf("message %q", msg)
		}
		// A failed check keeps the last known server facts.
		deriveDatabaseStatus(d, databaseFacts{failure: &blocker{reason: memoryv1alpha1.ReasonDatabaseUnreachable, message: "refused"}})
		if d.Status.ServerVersion != "17.5" || d.Status.Citus == nil {
			t.Errorf("after a failed check: %+v", d.Status)
		}
	})

	t.Run("the same check again changes nothing, lastCheck included", func(t *testing.T) {
		d := &memoryv1alpha1.MemoryDatabase{}
		d.Generation = 1
		deriveDatabaseStatus(d, databaseFacts{tenants: ptr.To[int32](1), info: info})
		stampLastCheck(&memoryv1alpha1.MemoryDatabase{}, d, time.Unix(1000, 0))
		orig := d.DeepCopy()
		again := *info
		again.Bytes += 200 << 10 // autovacuum wrote a page or two
		deriveDatabaseStatus(d, databaseFacts{tenants: ptr.To[int32](1), info: &again})
		stampLastCheck(orig, d, time.Unix(2000, 0))
		if !equality.Semantic.DeepEqual(orig.Status, d.Status) {
			t.Errorf("an unchanged database changed its status:\n%+v\n%+v", orig.Status, d.Status)
		}
		// One more tenant: the status changes, and lastCheck with it.
		deriveDatabaseStatus(d, databaseFacts{tenants: ptr.To[int32](2), info: &again})
		stampLastCheck(orig, d, time.Unix(3000, 0))
		if d.Status.LastCheck == nil || d.Status.LastCheck.Unix() != 3000 {
			t.Errorf("lastCheck = %v after a change", d.Status.LastCheck)
		}
	})
}

// TestBytesToRecord: the size is written again only when it moved by the
// hysteresis (1 %, at least 1 MiB), and in whole MiB.
func TestBytesToRecord(t *testing.T) {
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	cases := []struct {
		recorded *resource.Quantity
		measured int64
		want     string
	}{
		{nil, 7_456_423, "7Mi"},
		{q("7Mi"), 7<<20 + 900<<10, "7Mi"},   // under 1 MiB more
		{q("7Mi"), 8<<20 + 100<<10, "8Mi"},   // 1.1 MiB more
		{q("7Mi"), 6<<20 + 100<<10, "7Mi"},   // 0.9 MiB less
		{q("10Gi"), 10<<30 + 50<<20, "10Gi"}, // 0.5 %
		{q("10Gi"), 10<<30 + 200<<20, "10440Mi"},
	}
	for _, c := range cases {
		if got := bytesToRecord(c.recorded, c.measured); got.String() != c.want {
			t.Errorf("bytesToRecord(%v, %d) = %s, want %s", c.recorded, c.measured, got, c.want)
		}
	}
}

// The check's verdict is what placement reads: never checked, or not since
// the spec changed, is Unknown.
func TestReachability(t *testing.T) {
	d := &memoryv1alpha1.MemoryDatabase{}
	d.Generation = 1
	if got := d.Reachability(); got != metav1.ConditionUnknown {
		t.Errorf("unchecked: %s", got)
	}
	d.SetCondition(memoryv1alpha1.ConditionReachable, true, memoryv1alpha1.ReasonConnected, "ok")
	if got := d.Reachability(); got != metav1.ConditionTrue {
		t.Errorf("checked: %s", got)
	}
	d.Generation = 2
	if got := d.Reachability(); got != metav1.ConditionUnknown {
		t.Errorf("spec changed since: %s", got)
	}
}
