package controller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

func standardPolicy(ns string) *memoryv1alpha1.MemoryPolicy {
	spec := crdDefaults()
	spec.Categories = []memoryv1alpha1.CategorySpec{
		{Name: "identity", Pinned: true, Protected: true, Priority: ptr.To[int32](100)},
		{Name: "preference", TTL: "90d"},
		{Name: "task", TTL: "7d", HalfLife: "2d"},
	}
	spec.Limits.MaxContentBytes = 800
	return &memoryv1alpha1.MemoryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "standard", Namespace: ns}, Spec: spec}
}

// scenarioLifecycle: policy + runtime -> schema and roles in PostgreSQL, a
// credentials Secret that logs in and can only touch its own schema, the
// Deployment, Service and ConfigMap as specified, and Ready=True.
func scenarioLifecycle(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "life")
	mustCreate(t, e.c, standardPolicy(ns))
	start := time.Now()
	bot := e.readyRuntime(t, newRuntime(ns, "bot", "standard"))
	t.Logf("runtime Ready in %s", time.Since(start).Round(time.Millisecond))
	other := e.readyRuntime(t, newRuntime(ns, "other", ""))
	schema := SchemaFor(bot)

	st := bot.Status
	if st.Schema != schema || st.SchemaVersion != int32(tenant.LatestVersion) || st.Endpoint != "http://bot."+ns+".svc:8080" ||
		st.CredentialsSecret != "bot-db" || st.APITokenSecret != "bot-api-token" || st.ConfigHash == "" ||
		st.Policy == nil || st.Policy.Name != "standard" || st.ObservedGeneration != bot.Generation {
		t.Errorf("status = %+v", st)
	}
	for _, c := range []string{memoryv1alpha1.ConditionDatabaseReady, memoryv1alpha1.ConditionServiceAvailable} {
		if cond := bot.GetCondition(c); cond == nil || cond.Status != metav1.ConditionTrue {
			t.Errorf("%s = %+v", c, cond)
		}
	}
	if cond := bot.GetCondition(memoryv1alpha1.ConditionPaused); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("Paused = %+v", cond)
	}
	if !controllerutil.ContainsFinalizer(bot, naming.Finalizer) {
		t.Errorf("finalizers = %v", bot.Finalizers)
	}

	if exists, roles := e.tenantState(t, schema); !exists || roles != 2 {
		t.Fatalf("schema %s exists=%v with %d roles, want the schema and 2 roles", schema, exists, roles)
	}
	e.checkCredentials(t, ns, "bot", SchemaFor(other))

	var d appsv1.Deployment
	if err := e.get(t, ns, "bot", &d); err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != testImage || c.Command[1] != "serve" || !slices.Contains(c.Command, "--listen=:8080") ||
		d.Spec.Template.Annotations[naming.AnnotationConfigHash] != st.ConfigHash || !metav1.IsControlledBy(&d, bot) ||
		!*c.SecurityContext.ReadOnlyRootFilesystem || *d.Spec.Template.Spec.AutomountServiceAccountToken {
		t.Errorf("Deployment = %+v", d.Spec.Template)
	}
	var svc corev1.Service
	if err := e.get(t, ns, "bot", &svc); err != nil || svc.Spec.Ports[0].Port != 8080 || svc.Spec.Selector[naming.LabelInstance] != "bot" {
		t.Errorf("Service = %+v, %v", svc.Spec, err)
	}
	cfg := e.serviceConfig(t, ns, "bot")
	if cfg.Schema != schema || cfg.PolicyName != "standard" || cfg.Policy.Limits.MaxContentBytes != 800 ||
		len(cfg.Policy.Categories) != 3 || cfg.Policy.Categories[2].HalfLife.String() != "2d" || cfg.Embedding.Provider != "builtin" {
		t.Errorf("config = %+v", cfg)
	}
	var tokens corev1.Secret
	if err := e.get(t, ns, "bot-api-token", &tokens); err != nil || !specs.HasValidToken(string(tokens.Data["tokens"])) ||
		!strings.Contains(string(tokens.Data["tokens"]), " role=admin name=admin") || len(tokens.Data["signing-key"]) == 0 {
		t.Errorf("API token Secret = %v, %v", tokens.Data, err)
	}

	eventually(t, "policy Valid with 1 bound runtime", 20*time.Second, func() error {
		var p memoryv1alpha1.MemoryPolicy
		if err := e.get(t, ns, "standard", &p); err != nil {
			return err
		}
		if !p.IsValid() || p.Status.BoundRuntimes != 1 {
			return fmt.Errorf("status = %+v", p.Status)
		}
		return nil
	})
}

// botNamespace gives a scenario the state Lifecycle builds, its own: a
// namespace with the standard policy, runtime "bot" bound to it and runtime
// "other" without a policy, both Ready.
func (e *operatorEnv) botNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := e.newNamespace(t, prefix)
	mustCreate(t, e.c, standardPolicy(ns))
	runtimes := []*memoryv1alpha1.MemoryRuntime{newRuntime(ns, "bot", "standard"), newRuntime(ns, "other", "")}
	for _, rt := range runtimes {
		e.createRuntime(t, rt) // both provisioned at once
	}
	for _, rt := range runtimes {
		e.waitReady(t, ns, rt.Name)
	}
	return ns
}

// checkCredentials logs in with the runtime's Secret: the login role uses its
// schema and nothing else (not another tenant's, no DDL, not public).
func (e *operatorEnv) checkCredentials(t *testing.T, ns, name, otherSchema string) {
	t.Helper()
	var s corev1.Secret
	if err := e.get(t, ns, name+"-db", &s); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"uri", "host", "port", "dbname", "user", "password", "schema"} {
		if len(s.Data[k]) == 0 {
			t.Errorf("credentials Secret has no %q", k)
		}
	}
	ctx := testContext(t)
	conn, err := pgx.Connect(ctx, string(s.Data["uri"]))
	if err != nil {
		t.Fatalf("logging in with the credentials Secret: %v", err)
	}
	defer conn.Close(ctx)
	var user string
	if err := conn.QueryRow(ctx, `SELECT current_user`).Scan(&user); err != nil || user != string(s.Data["user"]) {
		t.Errorf("current_user = %q, %v", user, err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO memories (id, owner_id, source, category, content, embedding)
		VALUES ('00000000-0000-7000-8000-000000000001', 'u', 'user', 'identity', 'hello', array_fill(0.1::real, ARRAY[384])::vector)`); err != nil {
		t.Errorf("the login role cannot write its own schema: %v", err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM memories`); err != nil {
		t.Errorf("the login role cannot delete in its own schema: %v", err)
	}
	for _, sql := range []string{
		`SELECT count(*) FROM ` + pgx.Identifier{otherSchema, "memories"}.Sanitize(),
		`CREATE TABLE evil (id int)`,
		`CREATE TABLE public.evil (id int)`,
		`DROP TABLE memories`,
		`CREATE SCHEMA evil`,
		`CREATE TEMP TABLE evil (id int)`,
		`SELECT * FROM engram_control.provision_locks`,
	} {
		if _, err := conn.Exec(ctx, sql); err == nil {
			t.Errorf("the login role may %s", sql)
		}
	}
}

func (e *operatorEnv) serviceConfig(t *testing.T, ns, name string) *memory.ServiceConfig {
	t.Helper()
	var cm corev1.ConfigMap
	if err := e.get(t, ns, name+"-config", &cm); err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON([]byte(cm.Data["config.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := memory.ParseServiceConfigJSON(js)
	if err != nil {
		t.Fatalf("the service would refuse its config: %v", err)
	}
	return cfg
}

func (e *operatorEnv) templateHash(t *testing.T, ns, name string) string {
	t.Helper()
	var d appsv1.Deployment
	if err := e.get(t, ns, name, &d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Annotations[naming.AnnotationConfigHash]
}

// scenarioPolicyChange: editing the policy re-resolves the runtime: new
// ConfigMap, new pod template hash (a rollout). An invalid policy is
// reported and not rolled out.
func scenarioPolicyChange(e *operatorEnv, t *testing.T) {
	ns := e.botNamespace(t, "polchange")
	before := e.templateHash(t, ns, "bot")
	policy := &memoryv1alpha1.MemoryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "standard", Namespace: ns}}
	update(t, e, policy, func(p *memoryv1alpha1.MemoryPolicy) { p.Spec.Limits.MaxContentBytes = 1200 })
	eventually(t, "the new policy reaches the ConfigMap and the pod template", 20*time.Second, func() error {
		cfg := e.serviceConfig(t, ns, "bot")
		if cfg.Policy.Limits.MaxContentBytes != 1200 || cfg.PolicyGeneration != policy.Generation {
			return fmt.Errorf("config limits %+v generation %d", cfg.Policy.Limits, cfg.PolicyGeneration)
		}
		if h := e.templateHash(t, ns, "bot"); h == before {
			return errors.New("the pod template hash did not change")
		}
		return nil
	})
	// The ConfigMap and the Deployment are written before the status: wait
	// for the status of the same reconcile instead of reading a stale one.
	eventually(t, "the status reports the new policy and hash", 20*time.Second, func() error {
		rt := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, "")
		if rt.Status.Policy == nil || rt.Status.Policy.Generation != policy.Generation || rt.Status.ConfigHash != e.templateHash(t, ns, "bot") {
			return fmt.Errorf("status policy %+v hash %s", rt.Status.Policy, rt.Status.ConfigHash)
		}
		return nil
	})

	// An invalid regular expression passes CEL; the semantic check catches it.
	applied := e.templateHash(t, ns, "bot")
	update(t, e, policy, func(p *memoryv1alpha1.MemoryPolicy) { p.Spec.Redaction.Patterns = []string{"(unclosed"} })
	eventually(t, "the policy is reported invalid", 20*time.Second, func() error {
		var p memoryv1alpha1.MemoryPolicy
		if err := e.get(t, ns, "standard", &p); err != nil {
			return err
		}
		c := p.GetCondition(memoryv1alpha1.ConditionValid)
		if c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != p.Generation {
			return fmt.Errorf("Valid = %+v", c)
		}
		return containsAll(c.Message, "redaction.patterns[0]", "RE2")
	})
	rt := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonPolicyInvalid)
	if err := containsAll(rt.GetCondition(memoryv1alpha1.ConditionReady).Message, `MemoryPolicy "standard" is invalid`); err != nil {
		t.Error(err)
	}
	if h := e.templateHash(t, ns, "bot"); h != applied {
		t.Error("an invalid policy was rolled out")
	}
	update(t, e, policy, func(p *memoryv1alpha1.MemoryPolicy) { p.Spec.Redaction.Patterns = []string{`ticket-[0-9]+`} })
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, "")
	if cfg := e.serviceConfig(t, ns, "bot"); len(cfg.Policy.Redaction.Patterns) != 1 {
		t.Errorf("patterns = %v", cfg.Policy.Redaction.Patterns)
	}
}

// scenarioMissingPolicy: a runtime whose policy does not exist is not Ready,
// says why, and recovers when the policy appears.
func scenarioMissingPolicy(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "nopol")
	e.createRuntime(t, newRuntime(ns, "bot", "later"))
	rt := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonPolicyNotFound)
	if err := containsAll(rt.GetCondition(memoryv1alpha1.ConditionReady).Message, `MemoryPolicy "later" does not exist`, ns, "remove spec.policyRef"); err != nil {
		t.Error(err)
	}
	var d appsv1.Deployment
	if err := e.get(t, ns, "bot", &d); !apierrors.IsNotFound(err) {
		t.Errorf("a Deployment exists without its policy: %v", err)
	}
	later := standardPolicy(ns)
	later.Name = "later"
	mustCreate(t, e.c, later)
	e.markAvailable(t, ns, "bot")
	rt = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	if rt.Status.Policy == nil || rt.Status.Policy.Name != "later" {
		t.Errorf("status.policy = %+v", rt.Status.Policy)
	}
}

// scenarioDelete: reclaimPolicy Delete drops the schema and roles, Retain keeps
// them, a schema Engram did not create is never dropped, and the finalizer
// goes in every case.
func scenarioDelete(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "del")
	ctx := testContext(t)
	drop := newRuntime(ns, "drop", "")
	drop.Spec.ReclaimPolicy = memoryv1alpha1.ReclaimDelete
	keep := newRuntime(ns, "keep", "")
	handmade := "handmade_" + randomSuffix()
	if _, err := e.pool.Exec(ctx, "CREATE SCHEMA "+handmade); err != nil {
		t.Fatal(err)
	}
	foreign := newRuntime(ns, "foreign", "")
	foreign.Spec.ReclaimPolicy = memoryv1alpha1.ReclaimDelete
	foreign.Spec.Database.Schema = handmade

	for _, rt := range []*memoryv1alpha1.MemoryRuntime{drop, keep, foreign} {
		e.createRuntime(t, rt)
	}
	e.waitCondition(t, ns, "drop", memoryv1alpha1.ConditionDatabaseReady, true, "")
	e.waitCondition(t, ns, "keep", memoryv1alpha1.ConditionDatabaseReady, true, "")
	got := e.waitCondition(t, ns, "foreign", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonSchemaNotManaged)
	if err := containsAll(got.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message, handmade, "not created by Engram"); err != nil {
		t.Error(err)
	}

	for _, rt := range []*memoryv1alpha1.MemoryRuntime{drop, keep, foreign} {
		if err := e.c.Delete(ctx, rt); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"drop", "keep", "foreign"} {
		eventually(t, name+" is gone (finalizer removed)", 30*time.Second, func() error {
			var rt memoryv1alpha1.MemoryRuntime
			if err := e.get(t, ns, name, &rt); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v): %+v", err, rt.Status.Conditions)
			}
			return nil
		})
	}
	if exists, roles := e.tenantState(t, SchemaFor(drop)); exists || roles != 0 {
		t.Errorf("reclaimPolicy Delete left schema=%v and %d roles", exists, roles)
	}
	if exists, roles := e.tenantState(t, SchemaFor(keep)); !exists || roles != 2 {
		t.Errorf("reclaimPolicy Retain kept schema=%v and %d roles, want both", exists, roles)
	}
	if exists, _ := e.tenantState(t, handmade); !exists {
		t.Error("a schema Engram did not create was dropped")
	}
	if _, err := e.pool.Exec(ctx, "DROP SCHEMA "+handmade); err != nil {
		t.Error(err)
	}
}
