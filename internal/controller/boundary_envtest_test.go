package controller

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// scenarioTenantBoundary is the takeover of issue 12 tried against the running
// operator: names that collided before get distinct schemas, a runtime that
// names another's schema is refused (nothing changed, no Secret written,
// its delete drops nothing), and no admin credential reaches a tenant.
func scenarioTenantBoundary(e *operatorEnv, t *testing.T) {
	sfx := randomSuffix()
	nsA, nsB, nsC := "tb"+sfx, "tb"+sfx+"-x", "tbthief"+sfx
	for _, ns := range []string{nsA, nsB, nsC} {
		mustCreate(t, e.c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	if tenant.LegacySchemaName(nsA, "x-bot") != tenant.LegacySchemaName(nsB, "bot") {
		t.Fatal("the test names do not collide under the old naming")
	}
	victim := e.readyRuntime(t, newRuntime(nsA, "x-bot", ""))
	neighbour := e.readyRuntime(t, newRuntime(nsB, "bot", ""))
	if victim.Status.Schema == neighbour.Status.Schema {
		t.Fatalf("%s/x-bot and %s/bot share schema %s", nsA, nsB, victim.Status.Schema)
	}
	// A default name cannot even be asked for: the engram_ prefix is
	// reserved (CRD validation), so a tenant cannot claim another's
	// default schema before that tenant exists.
	squat := newRuntime(nsC, "squat", "")
	squat.Spec.Database.Schema = victim.Status.Schema
	if err := e.c.Create(testContext(t), squat); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("creating a runtime that names another's default schema: %v; want a refusal saying engram_ is reserved", err)
	}
	// An explicit name of the victim's, named by another tenant.
	explicit := newRuntime(nsA, "explicit", "")
	explicit.Spec.Database.Schema = "tb" + sfx + "_explicit"
	victim = e.readyRuntime(t, explicit)
	var before corev1.Secret
	if err := e.get(t, nsA, "explicit-db", &before); err != nil {
		t.Fatal(err)
	}

	thief := newRuntime(nsC, "thief", "")
	thief.Spec.Database.Schema = victim.Status.Schema
	thief.Spec.ReclaimPolicy = memoryv1alpha1.ReclaimDelete
	e.createRuntime(t, thief)
	got := e.waitCondition(t, nsC, "thief", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonSchemaOwnedByOther)
	if err := containsAll(got.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message, victim.Status.Schema, nsA+"/explicit"); err != nil {
		t.Error(err)
	}
	if got.Status.Schema != "" {
		t.Errorf("the refused runtime records the schema it asked for: status.schema = %q", got.Status.Schema)
	}
	e.waitEvent(t, nsC, "thief", memoryv1alpha1.ReasonSchemaOwnedByOther, nsA+"/explicit")
	var stolen corev1.Secret
	if err := e.get(t, nsC, "thief-db", &stolen); !apierrors.IsNotFound(err) {
		t.Errorf("the refused runtime got a credentials Secret (%v): %v", err, stolen.Data["user"])
	}
	if err := e.c.Delete(testContext(t), thief); err != nil {
		t.Fatal(err)
	}
	waitRuntimeGone(t, e, nsC, "thief", "thief deleted")
	if exists, roles := e.tenantState(t, victim.Status.Schema); !exists || roles != 2 {
		t.Fatalf("deleting the thief (reclaimPolicy Delete) dropped the victim's tenant: schema=%v roles=%d", exists, roles)
	}
	e.checkCredentials(t, nsA, "explicit", neighbour.Status.Schema) // the victim's password still works
	var after corev1.Secret
	if err := e.get(t, nsA, "explicit-db", &after); err != nil || string(after.Data["password"]) != string(before.Data["password"]) {
		t.Errorf("the victim's password changed (%v)", err)
	}

	scenarioAdminURLStaysWithTheOperator(e, t, nsC)
}

// scenarioAdminURLStaysWithTheOperator: an admin URL carrying credentials and
// options in its query gives tenants a URL with none of them, and a failing
// admin login does not name the admin user in conditions or events.
func scenarioAdminURLStaysWithTheOperator(e *operatorEnv, t *testing.T, ns string) {
	u, err := url.Parse(e.adminURL)
	if err != nil {
		t.Fatal(err)
	}
	adminUser := u.User.Username()
	adminPassword, _ := u.User.Password()
	q := u.Query()
	q.Set("user", adminUser)
	q.Set("password", adminPassword)
	q.Set("options", "-c statement_timeout=0")
	q.Set("application_name", "admin-tool")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // libpq-style: a space is %20, not +
	mustCreate(t, e.c, connectionSecret(e.opNS, "leaky-"+ns, u.String()))
	rt := newRuntime(ns, "leaky", "")
	rt.Spec.Database.ClusterConnection = "leaky-" + ns
	e.readyRuntime(t, rt)
	var creds corev1.Secret
	if err := e.get(t, ns, "leaky-db", &creds); err != nil {
		t.Fatal(err)
	}
	for k, v := range creds.Data {
		for _, leak := range []string{adminPassword, "options", "statement_timeout", "admin-tool", "user=", "password="} {
			if strings.Contains(string(v), leak) {
				t.Errorf("tenant Secret key %q holds %q: %s", k, leak, v)
			}
		}
	}
	conn, err := pgx.Connect(testContext(t), string(creds.Data["uri"]))
	if err != nil {
		t.Fatal(err)
	}
	var who string
	if err := conn.QueryRow(testContext(t), "SELECT current_user").Scan(&who); err != nil || who == adminUser {
		t.Errorf("the tenant URI logs in as %q (%v)", who, err)
	}
	_ = conn.Close(testContext(t))

	// A wrong admin password: the condition and the events say so without
	// naming the admin user.
	bad, _ := url.Parse(e.adminURL)
	bad.User = url.UserPassword(adminUser, "wrong-"+randomSuffix())
	mustCreate(t, e.c, connectionSecret(e.opNS, "badpw-"+ns, bad.String()))
	rt = newRuntime(ns, "badpw", "")
	rt.Spec.Database.ClusterConnection = "badpw-" + ns
	e.createRuntime(t, rt)
	got := e.waitCondition(t, ns, "badpw", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonConnectionInvalid)
	for _, c := range got.Status.Conditions {
		if strings.Contains(c.Message, "user="+adminUser) || strings.Contains(c.Message, `"`+adminUser+`"`) {
			t.Errorf("condition %s names the admin user: %s", c.Type, c.Message)
		}
	}
	for _, ev := range e.events(t, ns, "badpw") {
		if strings.Contains(ev.Note, "user="+adminUser) || strings.Contains(ev.Note, `"`+adminUser+`"`) {
			t.Errorf("event %s names the admin user: %s", ev.Reason, ev.Note)
		}
	}
}

// events lists the events about one runtime.
func (e *operatorEnv) events(t *testing.T, ns, name string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := e.c.List(testContext(t), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Regarding.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

// waitEvent waits for an event about a runtime with reason and a note
// containing text.
func (e *operatorEnv) waitEvent(t *testing.T, ns, name, reason, text string) {
	t.Helper()
	eventually(t, fmt.Sprintf("event %s about %s/%s", reason, ns, name), 30*time.Second, func() error {
		for _, ev := range e.events(t, ns, name) {
			if ev.Reason == reason && strings.Contains(ev.Note, text) {
				return nil
			}
		}
		var seen []string
		for _, ev := range e.events(t, ns, name) {
			seen = append(seen, ev.Reason+": "+ev.Note)
		}
		return fmt.Errorf("no such event yet; events: %q", seen)
	})
}
