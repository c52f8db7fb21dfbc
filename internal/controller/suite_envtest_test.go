package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5/pgxpool"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/localpod"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// operatorEnv is one real kube-apiserver + etcd, one real PostgreSQL
// database and the operator running in-process against both, shared by the
// subtests of TestOperator (starting a control plane takes seconds).
type operatorEnv struct {
	c        client.Client // the test's own client: uncached, not counted
	adminURL string
	pool     *pgxpool.Pool // admin pool for assertions
	opNS     string
	writes   *writeCounter // write requests of the operator
	mgr      manager.Manager
	faults   *faultInjector           // the operator's Options.FailAfter
	replay   *replaySet               // the operator's Options.ReplayMigrations
	runtimes *MemoryRuntimeReconciler // the operator's own, for the restart test

	mu      sync.Mutex
	tenants []trackedTenant // tenants to drop at the end
}

const testImage = "registry.example/engram:test"

// TestOperator runs every envtest scenario of the operator against one
// control plane (starting one takes seconds). Each scenario makes its own
// namespace and objects, so any of them runs alone:
//
//	go test -run 'TestOperator/Drift' ./internal/controller/
//
// The independent ones run concurrently, the serial ones after them, one at
// a time; the idle check runs last, over everything the others left.
func TestOperator(t *testing.T) {
	e := startOperator(t)
	var serial []scenario
	concurrent := make(chan struct{}, scenarioWidth)
	var wg sync.WaitGroup
	for _, s := range operatorScenarios() {
		if s.serial {
			serial = append(serial, s)
			continue
		}
		// Subtests started from goroutines rather than t.Parallel: parallel
		// subtests run only once TestOperator's body has returned, and the
		// idle check must come after them.
		wg.Add(1)
		go func() {
			defer wg.Done()
			concurrent <- struct{}{}
			defer func() { <-concurrent }()
			t.Run(s.name, func(t *testing.T) { s.run(e, t) })
		}()
	}
	wg.Wait()
	for _, s := range serial {
		t.Run(s.name, func(t *testing.T) { s.run(e, t) })
	}
	t.Run("Idle", func(t *testing.T) { scenarioIdle(e, t) })
}

func startOperator(t *testing.T) *operatorEnv {
	t.Helper()
	start := time.Now()
	_, cfg := testenv.ControlPlane(t)
	adminURL := testenv.NewDatabase(t)
	e := &operatorEnv{adminURL: adminURL, opNS: "engram-system", writes: &writeCounter{}, faults: newFaultInjector(), replay: &replaySet{}}
	t.Cleanup(func() { e.dropTenants(t) }) // before the database is dropped: roles are cluster-wide
	e.pool = testenv.NewPool(t, adminURL, 4)

	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	ctx := testContext(t)
	mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.opNS}})
	mustCreate(t, c, connectionSecret(e.opNS, "main", adminURL))

	// The operator's requests go through a counting transport: the idle
	// test asserts it makes no write at all.
	mgrCfg := rest.CopyConfig(cfg)
	mgrCfg.Wrap(e.writes.wrap)
	ctrl.SetLogger(testLogger())
	setupHook = func(r *MemoryRuntimeReconciler) { e.runtimes = r }
	mgr, err := NewManager(mgrCfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}, Options{
		OperatorNamespace:  e.opNS,
		ServiceImage:       testImage,
		GrantCheckInterval: 10 * time.Minute,
		RetryBaseDelay:     100 * time.Millisecond,
		RetryMaxDelay:      2 * time.Second,
		NotOwnedRetry:      time.Second,
		// A tenant's snapshot is ended 2 s into a provisioning it blocks
		// (scenarioTenantSnapshot); the default is 60 s.
		TenantBlockerMaxAge: 2 * time.Second,
		// No transaction reaper: with that maximum age it could end the
		// snapshot scenarioTenantSnapshot wants the provisioning watcher to
		// end. scenarioTenantTransactionReaped runs one of its own.
		TenantReaperInterval: -1,
		FailAfter:            e.faults.failAfter,
		ReplayMigrations:     e.replay.has,
		// Databases are checked every second here (default 1 min), so a
		// server that stops is noticed at once (scenarioDatabaseServerDown);
		// the idle check proves the checks write nothing.
		DatabaseCheckInterval: time.Second,
		// A move of seconds (scenarioCitus) reports its progress too
		// (default: one write per 10 s at most).
		MoveProgressInterval: time.Second,
		// A freeze held longer is lifted (scenarioServerMoveFreezeTooLong);
		// the moves of the other scenarios freeze for about a second.
		MoveFreezeTimeout: 15 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.mgr = mgr
	mgrCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the manager stopped with: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the operator's cache did not sync")
	}
	t.Logf("control plane, database and operator up in %s", time.Since(start).Round(time.Millisecond))
	return e
}

// testLogger shows the operator's errors on stderr (ENGRAM_TEST_LOG=debug for everything).
func testLogger() logr.Logger {
	level := slog.LevelError
	if os.Getenv("ENGRAM_TEST_LOG") == "debug" {
		level = slog.LevelDebug
	}
	return logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// writeCounter counts the requests that may change something (anything but
// GET): the operator's API writes.
type writeCounter struct {
	n   atomic.Int64
	mu  sync.Mutex
	log []string
}

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.n.Add(1)
			w.mu.Lock()
			w.log = append(w.log, req.Method+" "+req.URL.Path)
			w.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// since returns the writes after the first skip ones.
func (w *writeCounter) since(skip int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.log[min(skip, len(w.log)):])
}

func (w *writeCounter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.log)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (e *operatorEnv) dropTenants(t *testing.T) {
	e.mu.Lock()
	tenants := slices.Clone(e.tenants)
	e.mu.Unlock()
	if len(tenants) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, e.adminURL)
	if err != nil {
		t.Logf("dropping tenants: %v", err)
		return
	}
	defer pool.Close()
	for _, s := range tenants {
		if _, err := tenant.Drop(ctx, pool, s.schema, s.owner); err != nil {
			t.Logf("dropping tenant %s: %v", s.schema, err)
		}
	}
}

// track remembers a runtime's schema for the final cleanup.
func (e *operatorEnv) track(rt *memoryv1alpha1.MemoryRuntime) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tenants = append(e.tenants, trackedTenant{schema: SchemaFor(rt), owner: TenantOwner(rt)})
}

// --- helpers ---------------------------------------------------------------

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func randomSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newNamespace creates a namespace of its own for one scenario.
func (e *operatorEnv) newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := prefix + "-" + randomSuffix()
	mustCreate(t, e.c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	return ns
}

func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(testContext(t), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func connectionSecret(ns, name, url string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "pg-" + name, Namespace: ns, Labels: map[string]string{naming.LabelConnection: name}},
		StringData: map[string]string{"uri": url},
	}
}

// runtime is a MemoryRuntime on the test database ("main").
func newRuntime(ns, name, policy string) *memoryv1alpha1.MemoryRuntime {
	rt := &memoryv1alpha1.MemoryRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       memoryv1alpha1.MemoryRuntimeSpec{Database: memoryv1alpha1.DatabaseSpec{ClusterConnection: "main"}},
	}
	if policy != "" {
		rt.Spec.PolicyRef = &memoryv1alpha1.LocalObjectReference{Name: policy}
	}
	return rt
}

// tenantLogin is the login of runtime name: the URI and role of its
// <name>-db Secret, as a tenant's pods have them.
func (e *operatorEnv) tenantLogin(t *testing.T, ns, name string) (uri, role string) {
	t.Helper()
	var creds corev1.Secret
	if err := e.get(t, ns, name+"-db", &creds); err != nil {
		t.Fatal(err)
	}
	return string(creds.Data["uri"]), string(creds.Data["user"])
}

func (e *operatorEnv) createRuntime(t *testing.T, rt *memoryv1alpha1.MemoryRuntime) {
	t.Helper()
	mustCreate(t, e.c, rt)
	e.track(rt) // after create: the owner is the UID

}

// eventually polls check until it returns nil, or fails the test with its last error.
func eventually(t *testing.T, what string, timeout time.Duration, check func() error) {
	t.Helper()
	testenv.Eventually(t, what, timeout, check)
}

// waitRuntimeGone waits until runtime ns/name is gone (its finalizer
// done); what names the wait.
func waitRuntimeGone(t *testing.T, e *operatorEnv, ns, name, what string) {
	t.Helper()
	eventually(t, what, 30*time.Second, func() error {
		if err := e.get(t, ns, name, &memoryv1alpha1.MemoryRuntime{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
}

func (e *operatorEnv) get(t *testing.T, ns, name string, obj client.Object) error {
	t.Helper()
	return e.c.Get(testContext(t), client.ObjectKey{Namespace: ns, Name: name}, obj)
}

// waitCondition waits until the runtime's condition has status want (and
// reason, when given) for its current generation, and returns the runtime.
func (e *operatorEnv) waitCondition(t *testing.T, ns, name, condType string, want bool, reason string) *memoryv1alpha1.MemoryRuntime {
	t.Helper()
	rt := &memoryv1alpha1.MemoryRuntime{}
	eventually(t, fmt.Sprintf("%s/%s %s=%v %s", ns, name, condType, want, reason), 30*time.Second, func() error {
		if err := e.get(t, ns, name, rt); err != nil {
			return err
		}
		c := meta.FindStatusCondition(rt.Status.Conditions, condType)
		switch {
		case c == nil:
			return fmt.Errorf("no %s condition yet; conditions %v", condType, rt.Status.Conditions)
		case c.ObservedGeneration != rt.Generation:
			return fmt.Errorf("%s is for generation %d, object is at %d", condType, c.ObservedGeneration, rt.Generation)
		case (c.Status == metav1.ConditionTrue) != want || (reason != "" && c.Reason != reason):
			return fmt.Errorf("%s is %s (%s: %s)", condType, c.Status, c.Reason, c.Message)
		}
		return nil
	})
	return rt
}

// markAvailable plays the deployment controller (envtest runs none): it
// reports every replica of the runtime's Deployment as updated and available.
func (e *operatorEnv) markAvailable(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, "marking Deployment "+ns+"/"+name+" available", 30*time.Second, func() error {
		var d appsv1.Deployment
		if err := e.get(t, ns, name, &d); err != nil {
			return err
		}
		d.Status = localpod.AvailableStatus(&d, *d.Spec.Replicas)
		return e.c.Status().Update(testContext(t), &d)
	})
}

// readyRuntime creates a runtime and brings it to Ready.
func (e *operatorEnv) readyRuntime(t *testing.T, rt *memoryv1alpha1.MemoryRuntime) *memoryv1alpha1.MemoryRuntime {
	t.Helper()
	e.createRuntime(t, rt)
	return e.waitReady(t, rt.Namespace, rt.Name)
}

// waitReady brings a created runtime to Ready: provisioned, its Deployment
// reported available.
func (e *operatorEnv) waitReady(t *testing.T, ns, name string) *memoryv1alpha1.MemoryRuntime {
	t.Helper()
	e.waitCondition(t, ns, name, memoryv1alpha1.ConditionDatabaseReady, true, "")
	e.markAvailable(t, ns, name)
	return e.waitCondition(t, ns, name, memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
}

// update re-reads obj, applies mutate and writes it, retrying on conflicts.
func update[T client.Object](t *testing.T, e *operatorEnv, obj T, mutate func(T)) {
	t.Helper()
	eventually(t, fmt.Sprintf("updating %T %s", obj, obj.GetName()), 10*time.Second, func() error {
		if err := e.get(t, obj.GetNamespace(), obj.GetName(), obj); err != nil {
			return err
		}
		mutate(obj)
		err := e.c.Update(testContext(t), obj)
		if apierrors.IsConflict(err) {
			return err
		}
		if err != nil {
			t.Fatalf("updating %T %s: %v", obj, obj.GetName(), err)
		}
		return nil
	})
}

// schemaExists reports whether the schema and its two roles exist.
func (e *operatorEnv) tenantState(t *testing.T, schema string) (schemaExists bool, roles int) {
	t.Helper()
	ctx := testContext(t)
	if err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&schemaExists); err != nil {
		t.Fatal(err)
	}
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname IN ($1, $2)`, tenant.OwnerRole(schema), tenant.LoginRole(schema)).Scan(&roles); err != nil {
		t.Fatal(err)
	}
	return schemaExists, roles
}

func containsAll(s string, parts ...string) error {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return fmt.Errorf("%q does not contain %q", s, p)
		}
	}
	return nil
}

// trackedTenant is a tenant a test created through a runtime.
type trackedTenant struct {
	schema string
	owner  tenant.Owner
}
