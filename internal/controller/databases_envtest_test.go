package controller

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// memoryDatabase is a MemoryDatabase whose admin Secret is secret (in the
// operator's namespace), with labels and maxTenants (0: no bound), that
// admits every namespace (allowedNamespaces {}).
func memoryDatabase(name, secret string, labels map[string]string, maxTenants int32) *memoryv1alpha1.MemoryDatabase {
	d := &memoryv1alpha1.MemoryDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: memoryv1alpha1.MemoryDatabaseSpec{SecretRef: memoryv1alpha1.SecretKeySelector{Name: secret},
			AllowedNamespaces: &metav1.LabelSelector{}},
	}
	if maxTenants > 0 {
		d.Spec.Capacity.MaxTenants = ptr.To(maxTenants)
	}
	return d
}

// uriSecret is an admin Secret of the operator's namespace with key uri.
func uriSecret(ns, name, uri string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: map[string]string{"uri": uri}}
}

// cnpgSuperuserSecret is the <cluster>-superuser Secret as CloudNativePG
// writes it (pkg/specs/secrets.go there): basic-auth type, the user under
// both username and user, database "*" (any), a pgpass line and four URIs,
// here pointing at the test's PostgreSQL.
func cnpgSuperuserSecret(t *testing.T, ns, name, adminURL string) *corev1.Secret {
	t.Helper()
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatal(err)
	}
	user, pw := u.User.Username(), ""
	if p, ok := u.User.Password(); ok {
		pw = p
	}
	build := func(scheme, host string) string {
		return (&url.URL{Scheme: scheme, User: url.UserPassword(user, pw), Host: host, Path: "*"}).String()
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			"cnpg.io/userType": "superuser", "cnpg.io/reload": "true", "app.kubernetes.io/managed-by": "cloudnative-pg"}},
		Type: corev1.SecretTypeBasicAuth,
		StringData: map[string]string{
			"username": user, "user": user, "password": pw, "dbname": "*",
			"host": u.Hostname(), "port": u.Port(),
			"pgpass":        fmt.Sprintf("%s:%s:*:%s:%s\n", u.Hostname(), u.Port(), user, pw),
			"uri":           build("postgresql", u.Host),
			"jdbc-uri":      "jdbc:postgresql://" + u.Host + "/*?password=" + url.QueryEscape(pw) + "&user=" + user,
			"fqdn-uri":      build("postgresql", u.Host),
			"fqdn-jdbc-uri": "jdbc:postgresql://" + u.Host + "/*?password=" + url.QueryEscape(pw) + "&user=" + user,
		},
	}
}

// databaseRuntime is a runtime placed by databaseRef (ref) or, when ref is
// empty, by the selector tier=<tier>.
func databaseRuntime(ns, name, ref, tier string) *memoryv1alpha1.MemoryRuntime {
	rt := &memoryv1alpha1.MemoryRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       memoryv1alpha1.MemoryRuntimeSpec{ReclaimPolicy: memoryv1alpha1.ReclaimDelete},
	}
	if ref != "" {
		rt.Spec.Database.DatabaseRef = &memoryv1alpha1.DatabaseReference{Name: ref}
	} else {
		rt.Spec.Database.DatabaseSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": tier}}
	}
	return rt
}

// waitReachable waits for the database's check to say want (with reason).
func (e *operatorEnv) waitReachable(t *testing.T, name string, want bool, reason string) *memoryv1alpha1.MemoryDatabase {
	t.Helper()
	d := &memoryv1alpha1.MemoryDatabase{}
	eventually(t, fmt.Sprintf("MemoryDatabase %s Reachable=%v %s", name, want, reason), 30*time.Second, func() error {
		if err := e.get(t, "", name, d); err != nil {
			return err
		}
		c := d.GetCondition(memoryv1alpha1.ConditionReachable)
		switch {
		case c == nil || c.ObservedGeneration != d.Generation:
			return fmt.Errorf("not checked yet: %+v", d.Status)
		case (c.Status == metav1.ConditionTrue) != want || reason != "" && c.Reason != reason:
			return fmt.Errorf("Reachable %s (%s: %s)", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	return d
}

// placedOn waits for the runtime's status.database and returns it.
func (e *operatorEnv) placedOn(t *testing.T, ns, name string) string {
	t.Helper()
	var rt memoryv1alpha1.MemoryRuntime
	eventually(t, "placement of "+ns+"/"+name, 60*time.Second, func() error {
		if err := e.get(t, ns, name, &rt); err != nil {
			return err
		}
		if rt.PlacedDatabase() == "" {
			return fmt.Errorf("not placed; conditions %v", rt.Status.Conditions)
		}
		return nil
	})
	return rt.PlacedDatabase()
}

// schemaIn reports whether schema exists in the database of url.
func schemaIn(t *testing.T, url, schema string) bool {
	t.Helper()
	exists, _ := schemaAndComment(t, url, schema)
	return exists
}

// schemaAndComment reports whether schema exists in the database of url,
// and its comment.
func schemaAndComment(t *testing.T, url, schema string) (bool, string) {
	t.Helper()
	var comment *string
	err := testenv.QueryRow(testContext(t), url, `SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = $1`, []any{schema}, &comment)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, ""
	}
	if err != nil {
		t.Fatal(err)
	}
	if comment == nil {
		return true, ""
	}
	return true, *comment
}

// deleteAndWait deletes objects and waits until they are gone.
func (e *operatorEnv) deleteAndWait(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := e.c.Delete(testContext(t), o); client.IgnoreNotFound(err) != nil {
			t.Fatalf("deleting %s: %v", o.GetName(), err)
		}
	}
	for _, o := range objs {
		eventually(t, "deletion of "+o.GetName(), 60*time.Second, func() error {
			err := e.get(t, o.GetNamespace(), o.GetName(), o)
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
	}
}

// scenarioDatabases: what a platform team applies with kubectl (server-side,
// from one YAML manifest, fleetManifest): two MemoryDatabases — a plain
// PostgreSQL behind a Secret shaped like CloudNativePG's
// <cluster>-superuser and a Citus coordinator behind a uri — with
// capacities 6 and 4, and ten runtimes with a selector, all at once. The
// operator places them 6 and 4 (in proportion, no database over its
// capacity even though the ten are placed concurrently), records each
// placement in the runtime's status (and, on Citus, the worker that holds
// the schema, which `kubectl get memoryruntimes -o wide` shows), provisions
// each tenant on its database, and counts the tenants in the databases'
// status, the Citus one listing its workers. An eleventh finds no room
// (Stalled, NoDatabaseAvailable) until a database gets more capacity.
// Deleting the runtimes drops their schemas on the database each lives on.
func scenarioDatabases(e *operatorEnv, t *testing.T) {
	sfx := randomSuffix()
	tier := "placement-" + sfx
	urlA, urlB := testenv.NewDatabase(t), testenv.NewCitusDatabase(t)
	workers := map[string]bool{}
	for _, w := range testenv.CitusWorkerURLs(t, urlB) {
		workers[testenv.HostPort(w)] = true
	}
	mustCreate(t, e.c, cnpgSuperuserSecret(t, e.opNS, "pg-a-superuser-"+sfx, urlA))
	mustCreate(t, e.c, uriSecret(e.opNS, "pg-b-"+sfx, urlB))
	// A database name that does not exist on the server is the Secret's
	// (or databaseName's) fault: Stalled, not retried as if it were down.
	wrong := memoryDatabase("wrong-"+sfx, "pg-b-"+sfx, nil, 0)
	wrong.Spec.DatabaseName = "no_such_database_" + sfx
	mustCreate(t, e.c, wrong)
	e.waitReachable(t, wrong.Name, false, memoryv1alpha1.ReasonConnectionInvalid)
	e.waitKStatusDatabase(t, wrong.Name, status.FailedStatus)
	e.deleteAndWait(t, wrong)

	ns := e.newNamespace(t, "placement")
	fleet := fleetObjects{Suffix: sfx, Tier: tier, Namespace: ns, PlainDatabase: strings.TrimPrefix(mustParseURL(t, urlA).Path, "/")}
	for i := range 10 {
		fleet.Runtimes = append(fleet.Runtimes, fmt.Sprintf("bot-%d", i))
	}
	a := &memoryv1alpha1.MemoryDatabase{ObjectMeta: metav1.ObjectMeta{Name: fleet.plainName()}}
	b := &memoryv1alpha1.MemoryDatabase{ObjectMeta: metav1.ObjectMeta{Name: fleet.citusName()}}
	start := time.Now()
	e.kubectlApply(t, fleet.manifest(t))
	for _, d := range []string{a.Name, b.Name} {
		got := e.waitReachable(t, d, true, memoryv1alpha1.ReasonConnected)
		if got.Status.ServerVersion == "" || !hasExtension(got, "vector") || got.Status.BytesUsed == nil || got.Status.LastCheck == nil {
			t.Errorf("status of %s: %+v", d, got.Status)
		}
	}
	if got := e.waitReachable(t, a.Name, true, ""); got.Status.Citus != nil {
		t.Errorf("the plain database %s reports Citus: %+v", a.Name, got.Status.Citus)
	}
	citus := e.waitReachable(t, b.Name, true, "").Status.Citus
	if citus == nil || !citus.Coordinator || citus.Version == "" || len(citus.Workers) != len(workers) {
		t.Errorf("the Citus database %s reports %+v, want the coordinator with the workers %v", b.Name, citus, workers)
	} else {
		for _, w := range citus.Workers {
			if !workers[w] {
				t.Errorf("status.citus.workers of %s lists %s, not a worker of the cluster %v", b.Name, w, workers)
			}
		}
	}

	where := map[string][]string{}
	citusPool := testenv.NewPool(t, urlB, 2)
	placed := placedAll(e, t, ns, fleet.Runtimes)
	for _, name := range fleet.Runtimes {
		db := placed[name]
		where[db] = append(where[db], name)
		rt := e.waitCondition(t, ns, name, memoryv1alpha1.ConditionDatabaseReady, true, memoryv1alpha1.ReasonProvisioned)
		url := map[string]string{a.Name: urlA, b.Name: urlB}[db]
		other := map[string]string{a.Name: urlB, b.Name: urlA}[db]
		if !schemaIn(t, url, rt.Status.Schema) || schemaIn(t, other, rt.Status.Schema) {
			t.Errorf("%s: schema %s is not (only) in the database of %s", name, rt.Status.Schema, db)
		}
		switch db {
		case a.Name:
			if rt.Status.CitusWorker != "" {
				t.Errorf("%s on the plain database %s reports the Citus worker %q", name, db, rt.Status.CitusWorker)
			}
		case b.Name:
			p, err := tenant.SchemaPlacement(testContext(t), citusPool, rt.Status.Schema)
			if err != nil {
				t.Fatal(err)
			}
			if !workers[rt.Status.CitusWorker] || p.Worker != rt.Status.CitusWorker {
				t.Errorf("%s on Citus: status.citusWorker %q, the schema is on %q (workers %v)", name, rt.Status.CitusWorker, p.Worker, workers)
			}
		}
	}
	t.Logf("two databases and ten runtimes applied, placed and provisioned in %s: %v", time.Since(start).Round(time.Millisecond), where)
	if len(where[a.Name]) != 6 || len(where[b.Name]) != 4 {
		t.Errorf("placed %d on %s (capacity 6) and %d on %s (capacity 4): %v", len(where[a.Name]), a.Name, len(where[b.Name]), b.Name, where)
	}
	e.waitTenants(t, a.Name, 6)
	e.waitTenants(t, b.Name, 4)
	e.waitEvent(t, ns, where[a.Name][0], memoryv1alpha1.ReasonPlaced, "the most room of")
	e.checkWideTable(t, ns, where, b.Name)
	e.checkDatabaseTable(t, map[string]int{a.Name: 6, b.Name: 4}, b.Name)

	// Both full: the eleventh waits, Stalled (a human must add room), and
	// says why for each database.
	eleventh := databaseRuntime(ns, "bot-10", "", tier)
	mustCreate(t, e.c, eleventh)
	got := e.waitCondition(t, ns, "bot-10", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonNoDatabaseAvailable)
	if err := containsAll(got.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message, a.Name+": full (6 of 6 tenants)", b.Name+": full (4 of 4 tenants)"); err != nil {
		t.Error(err)
	}
	e.waitKStatus(t, eleventh, status.FailedStatus, memoryv1alpha1.ReasonNoDatabaseAvailable)
	// More room on b, but b cordoned: still none. Then uncordoned: placed.
	update(t, e, &memoryv1alpha1.MemoryDatabase{ObjectMeta: metav1.ObjectMeta{Name: b.Name}}, func(d *memoryv1alpha1.MemoryDatabase) {
		d.Spec.Capacity.MaxTenants, d.Spec.Cordoned = ptr.To[int32](5), true
	})
	e.waitCondition(t, ns, "bot-10", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonNoDatabaseAvailable)
	eventually(t, "bot-10 says b is cordoned", 30*time.Second, func() error {
		var rt memoryv1alpha1.MemoryRuntime
		if err := e.get(t, ns, "bot-10", &rt); err != nil {
			return err
		}
		return containsAll(rt.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message, b.Name+": cordoned")
	})
	update(t, e, &memoryv1alpha1.MemoryDatabase{ObjectMeta: metav1.ObjectMeta{Name: b.Name}}, func(d *memoryv1alpha1.MemoryDatabase) { d.Spec.Cordoned = false })
	if db := e.placedOn(t, ns, "bot-10"); db != b.Name {
		t.Errorf("bot-10 placed on %s, want %s (the only one with room)", db, b.Name)
	}
	e.waitCondition(t, ns, "bot-10", memoryv1alpha1.ConditionDatabaseReady, true, memoryv1alpha1.ReasonProvisioned)
	e.waitTenants(t, b.Name, 5)

	// A placed tenant never moves: a databaseRef naming the other database
	// is refused, and the tenant stays where it is.
	moved := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: where[a.Name][0]}}
	update(t, e, moved, func(rt *memoryv1alpha1.MemoryRuntime) {
		rt.Spec.Database.DatabaseSelector, rt.Spec.Database.DatabaseRef = nil, &memoryv1alpha1.DatabaseReference{Name: b.Name}
	})
	e.waitCondition(t, ns, moved.Name, memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonDatabaseChanged)
	if db := e.placedOn(t, ns, moved.Name); db != a.Name {
		t.Errorf("%s moved to %s", moved.Name, db)
	}
	update(t, e, moved, func(rt *memoryv1alpha1.MemoryRuntime) { rt.Spec.Database.DatabaseRef.Name = a.Name })
	e.waitCondition(t, ns, moved.Name, memoryv1alpha1.ConditionDatabaseReady, true, memoryv1alpha1.ReasonProvisioned)

	// Deleting the runtimes (reclaimPolicy Delete) drops each schema on
	// the database it lives on; the databases count no tenant then.
	var list memoryv1alpha1.MemoryRuntimeList
	if err := e.c.List(testContext(t), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var objs []client.Object
	schemas := map[string]string{}
	for i := range list.Items {
		objs = append(objs, &list.Items[i])
		schemas[list.Items[i].Status.Schema] = map[string]string{a.Name: urlA, b.Name: urlB}[list.Items[i].PlacedDatabase()]
	}
	e.deleteAndWait(t, objs...)
	for schema, url := range schemas {
		if schemaIn(t, url, schema) {
			t.Errorf("schema %s left behind after its runtime was deleted", schema)
		}
	}
	e.waitTenants(t, a.Name, 0)
	e.waitTenants(t, b.Name, 0)
	e.deleteAndWait(t, a, b)
}

func (e *operatorEnv) waitTenants(t *testing.T, name string, want int32) {
	t.Helper()
	eventually(t, fmt.Sprintf("MemoryDatabase %s counts %d tenants", name, want), 30*time.Second, func() error {
		var d memoryv1alpha1.MemoryDatabase
		if err := e.get(t, "", name, &d); err != nil {
			return err
		}
		if d.Status.Tenants != want {
			return fmt.Errorf("status.tenants %d", d.Status.Tenants)
		}
		return nil
	})
}

func hasExtension(d *memoryv1alpha1.MemoryDatabase, name string) bool {
	for _, x := range d.Status.Extensions {
		if x.Name == name {
			return true
		}
	}
	return false
}

func resourceMust(s string) resource.Quantity { return resource.MustParse(s) }

func mustParseURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// scenarioDatabaseCEL: what the API server refuses of a MemoryDatabase and of
// the new database fields of a MemoryRuntime.
func scenarioDatabaseCEL(e *operatorEnv, t *testing.T) {
	ctx := testContext(t)
	valid := memoryDatabase("valid-"+randomSuffix(), "pg", nil, 3)
	valid.Spec.Capacity.MaxBytes = ptr.To(resourceMust("200Gi"))
	if err := e.c.Create(ctx, valid, client.DryRunAll); err != nil {
		t.Fatalf("a valid MemoryDatabase is refused: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(*memoryv1alpha1.MemoryDatabase)
		want   string
	}{
		{"negative maxBytes", func(d *memoryv1alpha1.MemoryDatabase) { d.Spec.Capacity.MaxBytes = ptr.To(resourceMust("-1Gi")) },
			"capacity.maxBytes must be a positive size such as 200Gi"},
		{"zero maxBytes", func(d *memoryv1alpha1.MemoryDatabase) { d.Spec.Capacity.MaxBytes = ptr.To(resourceMust("0")) },
			"capacity.maxBytes must be a positive size such as 200Gi"},
		{"negative maxTenants", func(d *memoryv1alpha1.MemoryDatabase) { d.Spec.Capacity.MaxTenants = ptr.To[int32](-1) },
			"spec.capacity.maxTenants in body should be greater than or equal to 0"},
		{"no Secret", func(d *memoryv1alpha1.MemoryDatabase) { d.Spec.SecretRef.Name = "" }, "spec.secretRef.name in body should be at least 1 chars long"},
		{"database name with a slash", func(d *memoryv1alpha1.MemoryDatabase) { d.Spec.DatabaseName = "a/b" }, "databaseName must name one database: no /, ? or *"},
		{"name not a DNS label", func(d *memoryv1alpha1.MemoryDatabase) { d.Name = "main.db" }, "metadata.name must be a DNS label"},
		{"allowedNamespaces In without values", allowedExpr("In"), "operator In or NotIn takes values, Exists or DoesNotExist none"},
		{"allowedNamespaces Exists with values", allowedExpr("Exists", "a"), "operator In or NotIn takes values, Exists or DoesNotExist none"},
		{"allowedNamespaces unknown operator", allowedExpr("Equals", "a"), "operator In or NotIn takes values, Exists or DoesNotExist none"},
	}
	for _, ok := range []func(*memoryv1alpha1.MemoryDatabase){allowedExpr("In", "a"), allowedExpr("NotIn", "a"), allowedExpr("Exists"), allowedExpr("DoesNotExist")} {
		d := valid.DeepCopy()
		ok(d)
		if err := e.c.Create(ctx, d, client.DryRunAll); err != nil {
			t.Errorf("a valid allowedNamespaces %v is refused: %v", d.Spec.AllowedNamespaces, err)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := valid.DeepCopy()
			c.mutate(d)
			err := e.c.Create(ctx, d, client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("refused with %v, want %q", err, c.want)
			}
		})
	}
	ns := e.newNamespace(t, "dbcel")
	for _, c := range []struct {
		name   string
		mutate func(*memoryv1alpha1.DatabaseSpec)
	}{
		{"databaseRef and clusterConnection", func(d *memoryv1alpha1.DatabaseSpec) {
			d.ClusterConnection = "main"
		}},
		{"databaseRef and databaseSelector", func(d *memoryv1alpha1.DatabaseSpec) {
			d.DatabaseSelector = &metav1.LabelSelector{}
		}},
	} {
		rt := databaseRuntime(ns, "r", "a", "")
		c.mutate(&rt.Spec.Database)
		err := e.c.Create(ctx, rt, client.DryRunAll)
		if want := "set exactly one of database.connectionSecretRef, database.clusterConnection, database.databaseRef or database.databaseSelector"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: refused with %v, want %q", c.name, err, want)
		}
	}
	for _, rt := range []*memoryv1alpha1.MemoryRuntime{databaseRuntime(ns, "by-ref", "a", ""), databaseRuntime(ns, "by-selector", "", "x")} {
		if err := e.c.Create(ctx, rt, client.DryRunAll); err != nil {
			t.Errorf("%s is refused: %v", rt.Name, err)
		}
	}
}

// allowedExpr sets allowedNamespaces to one expression on key team.
func allowedExpr(op string, values ...string) func(*memoryv1alpha1.MemoryDatabase) {
	return func(d *memoryv1alpha1.MemoryDatabase) {
		d.Spec.AllowedNamespaces = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "team", Operator: metav1.LabelSelectorOperator(op), Values: values}}}
	}
}
