package controller

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/testenv"
)

// scenarioTenantSnapshot is issue 26's "no tenant can stall another" against
// the running operator: tenant A's login role (the credentials of its
// <name>-db Secret) holds a snapshot open forever, its timeouts SET away.
// Tenant B, created meanwhile, is provisioned (its migrations build indexes
// concurrently, which wait for A's snapshot) and becomes Ready: the
// operator ended A's session after --tenant-blocker-max-age (2 s in this
// suite), and both runtimes show a Warning event naming the blocker. A's
// committed memories are all there.
func scenarioTenantSnapshot(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "stall")
	a := e.readyRuntime(t, newRuntime(ns, "a", ""))
	uri, role := e.tenantLogin(t, ns, "a")
	conn, err := pgx.Connect(testContext(t), uri)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	const committed = 100
	if _, err := conn.Exec(testContext(t), `INSERT INTO memories (id, owner_id, source, category, content, embedding)
		SELECT gen_random_uuid(), 'owner-' || (g % 5), 'user', 'contextual', 'committed ' || g, array_fill(0.1::real, ARRAY[$2::int])::vector
		FROM generate_series(1, $1) g`, committed, a.EmbeddingDimensions()); err != nil {
		t.Fatal(err)
	}
	snap := testenv.HoldSnapshot(t, uri, "SELECT count(*) FROM memories")

	// B's schema is replayed as an upgrade would be: a new tenant's
	// one-step install builds no index concurrently and waits for no
	// snapshot (tenant/install.go).
	b := newRuntime(ns, "b", "")
	e.replay.add(client.ObjectKeyFromObject(b))
	e.readyRuntime(t, b)
	blocker := fmt.Sprintf("session %d of role %s", snap.PID, role)
	e.waitEvent(t, ns, "b", memoryv1alpha1.ReasonTenantBlockerEnded, blocker+" (MemoryRuntime "+ns+"/a, another tenant)")
	e.waitEvent(t, ns, "a", memoryv1alpha1.ReasonTransactionEnded, fmt.Sprintf("session %d of this runtime's login role %s", snap.PID, role))
	e.waitEvent(t, ns, "a", memoryv1alpha1.ReasonTransactionEnded, "provisioning of MemoryRuntime "+ns+"/b")
	for _, ev := range e.events(t, ns, "a") {
		if ev.Reason == memoryv1alpha1.ReasonTransactionEnded && ev.Type != corev1.EventTypeWarning {
			t.Errorf("event %s on A is %s, want Warning", ev.Reason, ev.Type)
		}
	}
	if err := snap.Alive(); err == nil {
		t.Fatal("A's blocking session is still alive")
	}
	var n int
	if err := e.pool.QueryRow(testContext(t), "SELECT count(*) FROM "+pgx.Identifier{a.Status.Schema, "memories"}.Sanitize()).Scan(&n); err != nil || n != committed {
		t.Fatalf("A has %d memories after its session was ended (%v), want the %d it committed", n, err, committed)
	}
	scenarioDBASnapshotIsKept(e, t, ns)
}

// scenarioDBASnapshotIsKept: a snapshot held by a role that is no tenant's (a
// DBA's) is never ended: the new runtime's provisioning (replayed as an
// upgrade, whose concurrent index builds wait for snapshots) waits for it, says
// so in a ProvisioningBlocked event and, once its index build gives up, in
// its DatabaseReady condition (naming the session); it becomes Ready once
// the DBA's transaction ends.
func scenarioDBASnapshotIsKept(e *operatorEnv, t *testing.T, ns string) {
	dba := "engram_test_dba_" + randomSuffix()
	if _, err := e.pool.Exec(testContext(t), "CREATE ROLE "+dba+" LOGIN PASSWORD 'dba'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.pool.Exec(context.Background(), "DROP ROLE IF EXISTS "+dba) })
	u, err := url.Parse(e.adminURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(dba, "dba")
	snap := testenv.HoldSnapshot(t, u.String(), "SELECT 1")

	c := newRuntime(ns, "c", "")
	e.replay.add(client.ObjectKeyFromObject(c)) // as B above: an upgrade's concurrent build
	e.createRuntime(t, c)
	session := fmt.Sprintf("session %d of role %s (not a tenant)", snap.PID, dba)
	e.waitEvent(t, ns, "c", memoryv1alpha1.ReasonProvisioningBlocked, session)
	got := e.waitCondition(t, ns, "c", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonProvisioningBlocked)
	if err := containsAll(got.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message, session, "never ends it"); err != nil {
		t.Error(err)
	}
	if err := snap.Alive(); err != nil {
		t.Fatalf("the DBA's session was ended: %v", err)
	}
	if _, err := snap.Conn.Exec(testContext(t), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	e.waitCondition(t, ns, "c", memoryv1alpha1.ConditionDatabaseReady, true, "")
	e.markAvailable(t, ns, "c")
	e.waitCondition(t, ns, "c", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
}
