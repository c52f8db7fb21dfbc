package controller

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/testenv"
)

// scenarioConnectionChanged: a provisioned runtime whose clusterConnection
// Secret, spec.database.clusterConnection or connectionSecretRef is changed
// to reach another PostgreSQL server is refused (DatabaseReady False, DatabaseChanged,
// Stalled, one Warning event), nothing is created on the other server, and
// the service keeps the credentials of the server its data is on. Without
// the guard the operator provisioned an empty schema on the other server
// and gave the service its credentials: the data stayed behind. A new
// password for the same server (the admin role's password changed and the
// Secret edited) keeps working, and status.connection records which server
// and database the tenant lives on, without anything from the Secret.
// Removing status.connection after a change accepts the new server
// (docs/operations.md, "Changing a runtime's connection"); a server that
// holds the tenant's schema is accepted whatever its identity (a major
// upgrade gives a server a new system identifier).
func scenarioConnectionChanged(e *operatorEnv, t *testing.T) {
	in := testenv.NewInstance(t, "connchange")
	in.Start(t)
	home := in.NewDatabase(t)
	sfx := randomSuffix()
	admin, pw1, pw2 := "conn_admin_"+strings.ReplaceAll(sfx, "-", "_"), "first-"+sfx, "second-"+sfx
	if err := testenv.Exec(testContext(t), home, fmt.Sprintf("CREATE ROLE %s LOGIN SUPERUSER PASSWORD '%s'", admin, pw1)); err != nil {
		t.Fatal(err)
	}
	withUser := func(raw, user, pw string) string {
		u := mustParseURL(t, raw)
		u.User = url.UserPassword(user, pw)
		return u.String()
	}
	homeName, elsewhere := "home-"+sfx, "elsewhere-"+sfx
	homeSecret := connectionSecret(e.opNS, homeName, withUser(home, admin, pw1))
	mustCreate(t, e.c, homeSecret)
	mustCreate(t, e.c, connectionSecret(e.opNS, elsewhere, e.adminURL))

	ns := e.newNamespace(t, "connchange")
	rt := newRuntime(ns, "bot", "")
	rt.Spec.Database.ClusterConnection = homeName
	rt.Spec.ReclaimPolicy = memoryv1alpha1.ReclaimDelete // dropped at the end
	rt = e.readyRuntime(t, rt)
	schema := rt.Status.Schema
	recorded := rt.Status.Connection
	if recorded == nil || recorded.DatabaseOID == 0 || recorded.Database != mustParseURL(t, home).Path[1:] || recorded.SystemIdentifier == "" {
		t.Fatalf("status.connection = %+v, want the system identifier, name and OID of the instance's database", recorded)
	}
	if !schemaIn(t, home, schema) {
		t.Fatalf("schema %s is not on the runtime's server", schema)
	}
	homeHost := mustParseURL(t, home).Host

	// The same server with a new admin password: accepted (a rotation,
	// which needs the admin connection, goes through with it).
	if err := testenv.Exec(testContext(t), home, fmt.Sprintf("ALTER ROLE %s PASSWORD '%s'", admin, pw2)); err != nil {
		t.Fatal(err)
	}
	setURI := func(name, uri string) {
		update(t, e, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.opNS, Name: "pg-" + name}}, func(s *corev1.Secret) {
			s.Data = map[string][]byte{"uri": []byte(uri)}
		})
	}
	setURI(homeName, withUser(home, admin, pw2))
	e.rotate(t, ns, "bot", "after-new-admin-password")
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, true, "")
	if *got.Status.Connection != *recorded {
		t.Errorf("status.connection changed with the password: %+v, was %+v", got.Status.Connection, recorded)
	}
	homeLogin, _ := e.tenantLogin(t, ns, "bot")

	// The Secret now reaches another server; then the runtime names
	// another clusterConnection, then a connectionSecretRef of its
	// namespace on the other server. Each is refused.
	own := uriSecret(ns, "own-pg", e.adminURL)
	mustCreate(t, e.c, own)
	setDatabase := func(d memoryv1alpha1.DatabaseSpec) func() {
		return func() {
			update(t, e, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}}, func(r *memoryv1alpha1.MemoryRuntime) {
				r.Spec.Database = d
			})
		}
	}
	homeSpec := rt.Spec.Database
	changes := []struct {
		what   string
		change func()
		undo   func()
	}{
		{"the clusterConnection Secret's contents", func() { setURI(homeName, e.adminURL) }, func() { setURI(homeName, withUser(home, admin, pw2)) }},
		{"spec.database.clusterConnection", setDatabase(memoryv1alpha1.DatabaseSpec{ClusterConnection: elsewhere}), setDatabase(homeSpec)},
		{"spec.database.connectionSecretRef", setDatabase(memoryv1alpha1.DatabaseSpec{ConnectionSecretRef: &memoryv1alpha1.SecretKeySelector{Name: own.Name}}), setDatabase(homeSpec)},
	}
	for _, c := range changes {
		since := time.Now()
		c.change()
		got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonDatabaseChanged)
		msg := got.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message
		t.Logf("%s changed: %s", c.what, msg)
		if err := containsAll(msg, recorded.SystemIdentifier, recorded.Database, "docs/export.md"); err != nil {
			t.Errorf("%s: %v", c.what, err)
		}
		if s := got.GetCondition(memoryv1alpha1.ConditionStalled); s == nil || s.Status != metav1.ConditionTrue {
			t.Errorf("%s: Stalled = %+v, want True", c.what, s)
		}
		if *got.Status.Connection != *recorded {
			t.Errorf("%s: status.connection = %+v, want %+v", c.what, got.Status.Connection, recorded)
		}
		e.waitEventSince(t, ns, "bot", memoryv1alpha1.ReasonDatabaseChanged, recorded.Database, since)
		if schemaIn(t, e.adminURL, schema) {
			t.Errorf("%s: schema %s was created on the other server", c.what, schema)
		}
		if login, _ := e.tenantLogin(t, ns, "bot"); login != homeLogin || mustParseURL(t, login).Host != homeHost {
			t.Errorf("%s: the service's credentials changed (host %s, want the home server's %s)", c.what, mustParseURL(t, login).Host, homeHost)
		}
		c.undo()
		e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	}
	if schemaIn(t, e.adminURL, schema) {
		t.Errorf("schema %s is on the other server", schema)
	}

	// The documented way to accept a new home (after moving the schema by
	// hand, which this test does not do): change the connection, then
	// remove status.connection.
	setDatabase(memoryv1alpha1.DatabaseSpec{ClusterConnection: elsewhere})()
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonDatabaseChanged)
	forget := client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/status/connection"}]`))
	if err := e.c.Status().Patch(testContext(t), &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}}, forget); err != nil {
		t.Fatal(err)
	}
	// A status change alone does not reconcile the runtime, nor does a
	// foreign annotation (the cache keeps only the operator's): a new
	// rotate-credentials value does, and provisions at once.
	e.rotate(t, ns, "bot", "new-home")
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, true, "")
	if c := got.Status.Connection; c == nil || c.SystemIdentifier == recorded.SystemIdentifier || !schemaIn(t, e.adminURL, schema) {
		t.Errorf("after status.connection was removed: status.connection = %+v (was %+v), schema on the new server: %v",
			c, recorded, schemaIn(t, e.adminURL, schema))
	}
	// Back on the first server, which still holds the tenant's schema, as
	// a server does after pg_upgrade gave it a new system identifier or a
	// restore: accepted, because the tenant's data is there (a Normal
	// event says so); then again on the new home, where it is reclaimed.
	newHome := *got.Status.Connection
	for _, back := range []struct {
		spec memoryv1alpha1.DatabaseSpec
		want memoryv1alpha1.RuntimeConnection
	}{{homeSpec, *recorded}, {memoryv1alpha1.DatabaseSpec{ClusterConnection: elsewhere}, newHome}} {
		since := time.Now()
		setDatabase(back.spec)()
		e.waitEventSince(t, ns, "bot", reasonServerChanged, schema, since)
		eventually(t, "status.connection names the server the schema is on", 30*time.Second, func() error {
			var rt memoryv1alpha1.MemoryRuntime
			if err := e.get(t, ns, "bot", &rt); err != nil {
				return err
			}
			if c := rt.Status.Connection; c == nil || *c != back.want {
				return fmt.Errorf("status.connection = %+v, want %+v", c, back.want)
			}
			return nil
		})
		e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	}
	// Reclaim the tenant on its new home.
	e.deleteAndWait(t, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}})
	if schemaIn(t, e.adminURL, schema) {
		t.Errorf("schema %s was not reclaimed", schema)
	}
}
