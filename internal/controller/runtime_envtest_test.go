package controller

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
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
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// The Lifecycle scenario's namespace; later scenarios build on its runtime.
var lifeNS string

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

// testLifecycle: policy + runtime -> schema and roles in PostgreSQL, a
// credentials Secret that logs in and can only touch its own schema, the
// Deployment, Service and ConfigMap as specified, and Ready=True.
func (e *operatorEnv) testLifecycle(t *testing.T) {
	ns := e.newNamespace(t, "life")
	lifeNS = ns
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
	if err := e.get(t, ns, "bot-api-token", &tokens); err != nil || !HasValidToken(string(tokens.Data["tokens"])) ||
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

// testPolicyChange: editing the policy re-resolves the runtime: new
// ConfigMap, new pod template hash (a rollout). An invalid policy is
// reported and not rolled out.
func (e *operatorEnv) testPolicyChange(t *testing.T) {
	ns := lifeNS
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

// testMissingPolicy: a runtime whose policy does not exist is not Ready,
// says why, and recovers when the policy appears.
func (e *operatorEnv) testMissingPolicy(t *testing.T) {
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

// closedPort returns a 127.0.0.1 port nothing listens on.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// testDatabaseDown: an unreachable database is a condition with the error
// and one Warning event (not one per retry), retried with exponential
// backoff (no crash, no hot loop of connections or writes), and recovers by
// itself when the database comes back at the same address: the connection
// Secret is never edited.
func (e *operatorEnv) testDatabaseDown(t *testing.T) {
	// The database "down" lives at 127.0.0.1:port. First something there
	// accepts and hangs up at once, counting the operator's attempts; then
	// nothing listens (connection refused); then a proxy to the real
	// PostgreSQL takes the port: the database is back.
	refuser := startRefuser(t)
	port := refuser.port()
	u, err := url.Parse(e.adminURL)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	u.Host = fmt.Sprintf("127.0.0.1:%d", port)
	q := u.Query()
	q.Set("sslmode", "disable") // no TLS attempt: fewer connections per attempt to count
	u.RawQuery = q.Encode()
	down := connectionSecret(e.opNS, "down", u.String())
	mustCreate(t, e.c, down)
	secretVersion := down.ResourceVersion
	ns := e.newNamespace(t, "down")
	rt := newRuntime(ns, "bot", "")
	rt.Spec.Database.ClusterConnection = "down"
	created := time.Now()
	e.createRuntime(t, rt)
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonDatabaseUnreachable)
	if err := containsAll(got.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message, u.Host); err != nil {
		t.Error(err)
	}
	if c := got.GetCondition(memoryv1alpha1.ConditionReady); c.Reason != memoryv1alpha1.ReasonDatabaseUnreachable {
		t.Errorf("Ready = %+v", c)
	}

	// Backoff: the delay between attempts doubles (100 ms up to 2 s in this
	// suite), so the attempts of the first 3 s outnumber those of the next
	// 3 s, and far fewer are made than a fixed 100 ms retry would (60).
	// One attempt is a burst of connections under 5 ms apart (pgxpool
	// dials again once when a new connection fails).
	time.Sleep(time.Until(created.Add(6 * time.Second)))
	var attempts []time.Time
	for _, at := range refuser.attempts() {
		if n := len(attempts); n == 0 || at.Sub(attempts[n-1]) >= 5*time.Millisecond {
			attempts = append(attempts, at)
		}
	}
	var first, second int
	var gaps []string
	for i, at := range attempts {
		if at.Sub(created) < 3*time.Second {
			first++
		} else if at.Sub(created) < 6*time.Second {
			second++
		}
		if i > 0 {
			gaps = append(gaps, at.Sub(attempts[i-1]).Round(10*time.Millisecond).String())
		}
	}
	t.Logf("connection attempts in 0-3 s: %d, in 3-6 s: %d; gaps %v", first, second, gaps)
	if first < 3 || second >= first || first+second > 15 {
		t.Errorf("attempts %d in the first 3 s and %d in the next 3 s: not an exponential backoff (gaps %v)", first, second, gaps)
	}

	// The database now refuses connections: the condition follows the
	// error, and no second event is written for the same reason.
	refuser.close()
	eventually(t, "the condition reports the refused connection", 10*time.Second, func() error {
		var now memoryv1alpha1.MemoryRuntime
		if err := e.get(t, ns, "bot", &now); err != nil {
			return err
		}
		c := now.GetCondition(memoryv1alpha1.ConditionDatabaseReady)
		if c == nil || c.Reason != memoryv1alpha1.ReasonDatabaseUnreachable {
			return fmt.Errorf("DatabaseReady = %+v", c)
		}
		return containsAll(c.Message, "connection refused")
	})
	// Retrying rewrites neither the status (same reason and message) nor
	// an event: an API write per retry would never let the system idle.
	mark := e.writes.count()
	time.Sleep(3 * time.Second)
	statusWrites := 0
	for _, w := range e.writes.since(mark) {
		if strings.Contains(w, "/namespaces/"+ns+"/") {
			statusWrites++
		}
	}
	if statusWrites > 0 {
		t.Errorf("%d writes in 3 s while the database is down: %v", statusWrites, e.writes.since(mark))
	}
	var warnings []string
	for _, ev := range e.events(t, ns, "bot") {
		if ev.Reason == memoryv1alpha1.ReasonDatabaseUnreachable {
			warnings = append(warnings, fmt.Sprintf("%s %q series=%v", ev.Type, ev.Note, ev.Series))
			if ev.Type != corev1.EventTypeWarning || ev.Series != nil || !strings.Contains(ev.Note, u.Host) {
				t.Errorf("event %s %q (series %v): want one Warning naming %s", ev.Type, ev.Note, ev.Series, u.Host)
			}
		}
	}
	if len(warnings) != 1 {
		t.Errorf("%d DatabaseUnreachable events, want exactly 1: %v", len(warnings), warnings)
	}

	// The database comes back at the same address; nobody edits anything.
	startProxy(t, fmt.Sprintf("127.0.0.1:%d", port), target)
	back := time.Now()
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, true, memoryv1alpha1.ReasonProvisioned)
	t.Logf("DatabaseReady %s after the database came back", time.Since(back).Round(10*time.Millisecond))
	e.waitEvent(t, ns, "bot", memoryv1alpha1.ReasonProvisioned, "created schema")
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	var after corev1.Secret
	if err := e.get(t, e.opNS, down.Name, &after); err != nil || after.ResourceVersion != secretVersion {
		t.Errorf("the connection Secret was changed (%v): recovery must need no user action", err)
	}
	e.checkCredentials(t, ns, "bot", SchemaFor(newRuntime(lifeNS, "bot", "")))

	// Delete the runtime (reclaimPolicy Retain) while the proxy still
	// runs: nothing may reconcile it through a closed port later (the idle
	// test watches every runtime).
	if err := e.c.Delete(testContext(t), rt); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the runtime is gone", 30*time.Second, func() error {
		if err := e.get(t, ns, "bot", &memoryv1alpha1.MemoryRuntime{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
}

// refuser stands for a PostgreSQL that is down: it accepts TCP connections
// on 127.0.0.1 and closes them at once, recording when each came.
type refuser struct {
	l  net.Listener
	mu sync.Mutex
	at []time.Time
}

func startRefuser(t *testing.T) *refuser {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &refuser{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.at = append(r.at, time.Now())
			r.mu.Unlock()
			_ = c.Close()
		}
	}()
	t.Cleanup(r.close)
	return r
}

func (r *refuser) port() int { return r.l.Addr().(*net.TCPAddr).Port }

func (r *refuser) close() { _ = r.l.Close() }

func (r *refuser) attempts() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.at)
}

// startProxy forwards TCP connections on addr to target until the test ends.
func startProxy(t *testing.T, addr, target string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
}

// testDrift: every kind of drift is real and repaired, each with its
// event: the owned Deployment deleted and edited, the credentials Secret
// edited and deleted, the ConfigMap and Service edited, a grant revoked and
// the login role dropped in PostgreSQL.
//
// Kubernetes drift is seen at once (the operator watches what it owns).
// Database drift is not watched: the operator verifies roles and grants
// every GrantCheckInterval (10 min in this suite). The test triggers the
// next verification as a user would, with the rotate-credentials
// annotation: a requested rotation verifies and repairs the tenant first.
func (e *operatorEnv) testDrift(t *testing.T) {
	ns := lifeNS
	var d appsv1.Deployment
	if err := e.get(t, ns, "bot", &d); err != nil {
		t.Fatal(err)
	}
	mark := time.Now()
	if err := e.c.Delete(testContext(t), &d); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment is recreated", 20*time.Second, func() error {
		var again appsv1.Deployment
		if err := e.get(t, ns, "bot", &again); err != nil {
			return err
		}
		if again.UID == d.UID {
			return errors.New("still the old Deployment")
		}
		return nil
	})
	e.waitEventSince(t, ns, "bot", "DeploymentCreated", "created Deployment bot", mark)
	e.markAvailable(t, ns, "bot")

	mark = time.Now()
	update(t, e, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns}}, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/evil:latest"
	})
	eventually(t, "the edited Deployment is restored", 20*time.Second, func() error {
		var again appsv1.Deployment
		if err := e.get(t, ns, "bot", &again); err != nil {
			return err
		}
		if img := again.Spec.Template.Spec.Containers[0].Image; img != testImage {
			return fmt.Errorf("image %s", img)
		}
		return nil
	})
	e.waitEventSince(t, ns, "bot", "DeploymentUpdated", "updated Deployment bot", mark)
	e.markAvailable(t, ns, "bot")

	var s corev1.Secret
	if err := e.get(t, ns, "bot-db", &s); err != nil {
		t.Fatal(err)
	}
	uri, password := string(s.Data["uri"]), string(s.Data["password"])
	mark = time.Now()
	update(t, e, &s, func(s *corev1.Secret) { s.Data["uri"] = []byte("postgres://evil@elsewhere/db") })
	eventually(t, "the edited uri is restored", 20*time.Second, func() error {
		var again corev1.Secret
		if err := e.get(t, ns, "bot-db", &again); err != nil {
			return err
		}
		if string(again.Data["uri"]) != uri {
			return fmt.Errorf("uri = %s", again.Data["uri"])
		}
		return nil
	})
	e.waitEventSince(t, ns, "bot", "SecretUpdated", "updated Secret bot-db", mark)

	hash := e.templateHash(t, ns, "bot")
	mark = time.Now()
	update(t, e, &s, func(s *corev1.Secret) { s.Data["password"] = []byte("typed-by-hand") })
	eventually(t, "a hand-edited password is replaced by a rotation", 20*time.Second, func() error {
		var again corev1.Secret
		if err := e.get(t, ns, "bot-db", &again); err != nil {
			return err
		}
		pw, ok := StoredPassword(&again)
		if !ok || pw == password || pw == "typed-by-hand" {
			return fmt.Errorf("password %q intact=%v", again.Data["password"], ok)
		}
		return nil
	})
	e.waitEventSince(t, ns, "bot", "CredentialsRotated", "changed by hand", mark)
	other := SchemaFor(newRuntime(ns, "other", ""))
	e.checkCredentials(t, ns, "bot", other)
	eventually(t, "the rotation rolls the pods", 20*time.Second, func() error {
		if e.templateHash(t, ns, "bot") == hash {
			return errors.New("pod template hash unchanged")
		}
		return nil
	})

	// The credentials Secret deleted: PostgreSQL keeps no readable copy of
	// the password, so the operator sets a new one and writes it.
	if err := e.get(t, ns, "bot-db", &s); err != nil {
		t.Fatal(err)
	}
	oldURI := string(s.Data["uri"])
	mark = time.Now()
	if err := e.c.Delete(testContext(t), &s); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted credentials Secret is recreated", 20*time.Second, func() error {
		var again corev1.Secret
		if err := e.get(t, ns, "bot-db", &again); err != nil {
			return err
		}
		if again.UID == s.UID || string(again.Data["uri"]) == oldURI {
			return errors.New("still the old Secret")
		}
		return nil
	})
	e.waitEventSince(t, ns, "bot", "CredentialsRotated", "Secret was missing", mark)
	e.waitEventSince(t, ns, "bot", "SecretCreated", "created Secret bot-db", mark)
	e.checkCredentials(t, ns, "bot", other)
	e.mustNotLogIn(t, oldURI, "the password of the deleted Secret")

	mark = time.Now()
	update(t, e, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bot-config", Namespace: ns}}, func(cm *corev1.ConfigMap) {
		cm.Data["config.yaml"] = "schema: hijacked\n"
	})
	update(t, e, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns}}, func(s *corev1.Service) {
		s.Spec.Ports[0].Port = 9999
	})
	eventually(t, "the ConfigMap and Service are restored", 20*time.Second, func() error {
		var cm corev1.ConfigMap
		if err := e.get(t, ns, "bot-config", &cm); err != nil {
			return err
		}
		if strings.Contains(cm.Data["config.yaml"], "hijacked") {
			return errors.New("the ConfigMap still holds the edit")
		}
		var svc corev1.Service
		if err := e.get(t, ns, "bot", &svc); err != nil || svc.Spec.Ports[0].Port != 8080 {
			return fmt.Errorf("service port %v, %v", svc.Spec.Ports, err)
		}
		return nil
	})
	e.waitEventSince(t, ns, "bot", "ConfigMapUpdated", "updated ConfigMap bot-config", mark)
	e.waitEventSince(t, ns, "bot", "ServiceUpdated", "updated Service bot", mark)
	if cfg := e.serviceConfig(t, ns, "bot"); cfg.Schema != SchemaFor(newRuntime(ns, "bot", "")) {
		t.Errorf("restored config has schema %s", cfg.Schema)
	}

	// A grant revoked in PostgreSQL: the service could no longer add.
	schema := SchemaFor(newRuntime(ns, "bot", ""))
	login := tenant.LoginRole(schema)
	ctx := testContext(t)
	memories := pgx.Identifier{schema, "memories"}.Sanitize()
	if _, err := e.pool.Exec(ctx, "REVOKE INSERT ON "+memories+" FROM "+pgx.Identifier{login}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	mark = time.Now()
	e.rotate(t, ns, "bot", "drift-grant")
	e.waitEventSince(t, ns, "bot", memoryv1alpha1.ReasonProvisioned, "granted INSERT on "+schema+".memories", mark)
	var canInsert bool
	if err := e.pool.QueryRow(ctx, `SELECT has_table_privilege($1, $2, 'INSERT')`, login, memories).Scan(&canInsert); err != nil || !canInsert {
		t.Errorf("INSERT on memories not granted back (%v)", err)
	}
	e.checkCredentials(t, ns, "bot", other)

	// The login role dropped: a new role, a new password in the Secret.
	if err := e.get(t, ns, "bot-db", &s); err != nil {
		t.Fatal(err)
	}
	oldURI = string(s.Data["uri"])
	ident := pgx.Identifier{login}.Sanitize()
	if _, err := e.pool.Exec(ctx, "DROP OWNED BY "+ident+"; DROP ROLE "+ident); err != nil {
		t.Fatal(err)
	}
	mark = time.Now()
	e.rotate(t, ns, "bot", "drift-role")
	e.waitEventSince(t, ns, "bot", memoryv1alpha1.ReasonProvisioned, "created role "+login, mark)
	eventually(t, "a new password in the Secret", 20*time.Second, func() error {
		if err := e.get(t, ns, "bot-db", &s); err != nil {
			return err
		}
		if string(s.Data["uri"]) == oldURI {
			return errors.New("the Secret still holds the dropped role's password")
		}
		return nil
	})
	if exists, roles := e.tenantState(t, schema); !exists || roles != 2 {
		t.Errorf("schema exists=%v with %d roles, want the schema and 2 roles", exists, roles)
	}
	e.checkCredentials(t, ns, "bot", other)
	e.mustNotLogIn(t, oldURI, "the dropped role's password")
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, "")
}

// rotate sets the rotate-credentials annotation and waits until the
// operator recorded the value.
func (e *operatorEnv) rotate(t *testing.T, ns, name, value string) {
	t.Helper()
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) {
		metav1.SetMetaDataAnnotation(&r.ObjectMeta, naming.AnnotationRotateCredentials, value)
	})
	eventually(t, "rotation "+value+" recorded", 20*time.Second, func() error {
		if err := e.get(t, ns, name, rt); err != nil {
			return err
		}
		if rt.Status.RotatedCredentials != value {
			return fmt.Errorf("status.rotatedCredentials = %q", rt.Status.RotatedCredentials)
		}
		return nil
	})
}

// mustNotLogIn fails the test if uri still logs in.
func (e *operatorEnv) mustNotLogIn(t *testing.T, uri, what string) {
	t.Helper()
	ctx := testContext(t)
	if c, err := pgx.Connect(ctx, uri); err == nil {
		_ = c.Close(ctx)
		t.Errorf("%s still logs in", what)
	}
}

// waitEventSince waits for an event about a runtime with reason and a note
// containing text, recorded (or repeated, for a series) after since.
func (e *operatorEnv) waitEventSince(t *testing.T, ns, name, reason, text string, since time.Time) {
	t.Helper()
	since = since.Truncate(time.Microsecond) // events carry microseconds
	eventually(t, fmt.Sprintf("event %s (%q) about %s/%s", reason, text, ns, name), 30*time.Second, func() error {
		var seen []string
		for _, ev := range e.events(t, ns, name) {
			at := ev.EventTime.Time
			if ev.Series != nil {
				at = ev.Series.LastObservedTime.Time
			}
			if ev.Reason == reason && !at.Before(since) && strings.Contains(ev.Note, text) {
				return nil
			}
			if ev.Reason == reason {
				seen = append(seen, ev.Note)
			}
		}
		return fmt.Errorf("none since %s; %s events: %q", since.Format(time.StampMicro), reason, seen)
	})
}

// testRotateAndPause: the rotate-credentials annotation rotates once per
// value; a paused runtime is left alone until it is resumed.
func (e *operatorEnv) testRotateAndPause(t *testing.T) {
	ns := lifeNS
	var s corev1.Secret
	if err := e.get(t, ns, "bot-db", &s); err != nil {
		t.Fatal(err)
	}
	oldURI := string(s.Data["uri"])
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns}}
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) {
		metav1.SetMetaDataAnnotation(&r.ObjectMeta, naming.AnnotationRotateCredentials, "2025-06-01")
	})
	var rotated string
	eventually(t, "the rotation is done and recorded", 20*time.Second, func() error {
		if err := e.get(t, ns, "bot", rt); err != nil {
			return err
		}
		if err := e.get(t, ns, "bot-db", &s); err != nil {
			return err
		}
		rotated = string(s.Data["uri"])
		if rt.Status.RotatedCredentials != "2025-06-01" || rotated == oldURI {
			return fmt.Errorf("rotatedCredentials %q, uri changed %v", rt.Status.RotatedCredentials, rotated != oldURI)
		}
		return nil
	})
	ctx := testContext(t)
	if c, err := pgx.Connect(ctx, oldURI); err == nil {
		c.Close(ctx)
		t.Error("the old password still logs in")
	}
	e.checkCredentials(t, ns, "bot", SchemaFor(newRuntime(ns, "other", "")))
	// Once per value: nothing more happens for the same value.
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { metav1.SetMetaDataLabel(&r.ObjectMeta, "touched", "yes") })
	time.Sleep(time.Second)
	if err := e.get(t, ns, "bot-db", &s); err != nil || string(s.Data["uri"]) != rotated {
		t.Errorf("the same annotation value rotated again (%v)", err)
	}

	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Paused = true })
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionPaused, true, memoryv1alpha1.ReasonPaused)
	update(t, e, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns}}, func(s *corev1.Service) { s.Spec.Ports[0].Port = 9999 })
	time.Sleep(2 * time.Second)
	var svc corev1.Service
	if err := e.get(t, ns, "bot", &svc); err != nil || svc.Spec.Ports[0].Port != 9999 {
		t.Errorf("a paused runtime's Service was changed: %v %v", svc.Spec.Ports, err)
	}
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Paused = false })
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionPaused, false, memoryv1alpha1.ReasonNotPaused)
	eventually(t, "the Service is restored after resuming", 20*time.Second, func() error {
		if err := e.get(t, ns, "bot", &svc); err != nil || svc.Spec.Ports[0].Port != 8080 {
			return fmt.Errorf("ports %v, %v", svc.Spec.Ports, err)
		}
		return nil
	})
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, "")
}

// testDelete: reclaimPolicy Delete drops the schema and roles, Retain keeps
// them, a schema Engram did not create is never dropped, and the finalizer
// goes in every case.
func (e *operatorEnv) testDelete(t *testing.T) {
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
