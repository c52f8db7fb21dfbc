package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// errInjected is the fault faultInjector returns.
var errInjected = errors.New("operator killed (injected by the test)")

// faultInjector is the suite operator's Options.FailAfter: each armed
// runtime fails once, after its step; every other runtime never.
type faultInjector struct {
	mu    sync.Mutex
	armed map[types.NamespacedName]*armedFault
	holds holds // queue_envtest_test.go
}

type armedFault struct {
	step string
	// before runs in the reconciler just before the fault, for the test to
	// look at the state the dead operator leaves behind.
	before func()
	fired  bool
}

func newFaultInjector() *faultInjector {
	return &faultInjector{armed: map[types.NamespacedName]*armedFault{}}
}

// arm makes the runtime key fail once after step.
func (f *faultInjector) arm(key types.NamespacedName, step string, before func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed[key] = &armedFault{step: step, before: before}
}

func (f *faultInjector) fired(key types.NamespacedName) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.armed[key]
	return a != nil && a.fired
}

func (f *faultInjector) failAfter(key types.NamespacedName, step string) error {
	f.holds.wait(key, step)
	f.mu.Lock()
	a := f.armed[key]
	if a == nil || a.fired || a.step != step {
		f.mu.Unlock()
		return nil
	}
	a.fired = true
	f.mu.Unlock()
	if a.before != nil {
		a.before()
	}
	return errInjected
}

// faultSteps are the points between provisioning steps at which the
// operator can die: the four of tenant.Provision and the two of the
// reconciler (Options.FailAfter).
var faultSteps = []string{"role created", "schema created", "migrated", "granted", "credentials secret written", "deployment applied"}

// scenarioOperatorFaults: an operator that dies after any provisioning step
// leaves a state the next run converges from: Ready, exactly the two roles
// of the tenant, a credentials Secret whose password logs in, and — once
// the Secret was written — the password the service already uses still
// works (no needless rotation, open connections keep working).
//
// The fault is an error from the FailAfter seam that the reconciler treats
// as a crash (no status written, its memory of the runtime forgotten); the
// retry is then what a newly started operator would do. What a real kill
// adds — the provisioning lease left held — is covered in internal/tenant
// (TestProvisionLockTimesOut: a dead operator's lease expires).
func scenarioOperatorFaults(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "fault")
	type faultCase struct {
		step, name string
		mu         sync.Mutex
		conn       *pgx.Conn // opened with the Secret at the fault, if it existed
		password   string
	}
	cases := make([]*faultCase, len(faultSteps))
	start := time.Now()
	for i, step := range faultSteps {
		c := &faultCase{step: step, name: fmt.Sprintf("f%d", i)}
		cases[i] = c
		key := types.NamespacedName{Namespace: ns, Name: c.name}
		e.faults.arm(key, step, func() {
			// Runs in the reconciler: no t.Fatal here. When the Secret is
			// already written, the service would be using it: connect as
			// it would.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var s corev1.Secret
			if err := e.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: c.name + "-db"}, &s); err != nil {
				return
			}
			conn, err := pgx.Connect(context.Background(), string(s.Data["uri"]))
			if err != nil {
				t.Errorf("%s: the Secret written before the fault does not log in: %v", step, err)
				return
			}
			c.mu.Lock()
			c.conn, c.password = conn, string(s.Data["password"])
			c.mu.Unlock()
		})
		e.createRuntime(t, newRuntime(ns, c.name, ""))
	}
	t.Cleanup(func() {
		for _, c := range cases {
			if c.conn != nil {
				_ = c.conn.Close(context.Background())
			}
		}
	})

	for _, c := range cases {
		e.waitCondition(t, ns, c.name, memoryv1alpha1.ConditionDatabaseReady, true, memoryv1alpha1.ReasonProvisioned)
		e.markAvailable(t, ns, c.name)
	}
	other := SchemaFor(newRuntime(ns, cases[0].name, ""))
	for _, c := range cases {
		rt := e.waitCondition(t, ns, c.name, memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
		if !e.faults.fired(types.NamespacedName{Namespace: ns, Name: c.name}) {
			t.Errorf("%s: the fault never fired", c.step)
			continue
		}
		schema := SchemaFor(rt)
		if exists, roles := e.tenantState(t, schema); !exists || roles != 2 {
			t.Errorf("%s: schema exists=%v with %d roles, want the schema and 2 roles", c.step, exists, roles)
		}
		var marked int
		if err := e.pool.QueryRow(testContext(t), `SELECT count(*) FROM pg_roles WHERE shobj_description(oid, 'pg_authid') LIKE '%uid=' || $1 || ';%'`,
			string(rt.UID)).Scan(&marked); err != nil || marked != 2 {
			t.Errorf("%s: %d roles carry the runtime's UID (%v), want exactly 2", c.step, marked, err)
		}
		otherSchema := other
		if schema == other {
			otherSchema = SchemaFor(newRuntime(ns, cases[1].name, ""))
		}
		e.checkCredentials(t, ns, c.name, otherSchema) // the Secret's password logs in, in its schema only

		c.mu.Lock()
		conn, before := c.conn, c.password
		c.mu.Unlock()
		if conn == nil {
			if c.step == "credentials secret written" || c.step == "deployment applied" {
				t.Errorf("%s: no connection was opened with the Secret at the fault", c.step)
			}
			continue // the fault came before the Secret existed
		}
		var s corev1.Secret
		if err := e.get(t, ns, c.name+"-db", &s); err != nil {
			t.Fatal(err)
		}
		if string(s.Data["password"]) != before {
			t.Errorf("%s: the password was rotated after the fault; the service's credentials were valid", c.step)
		}
		var who string
		if err := conn.QueryRow(testContext(t), `SELECT current_user`).Scan(&who); err != nil || who != tenant.LoginRole(schema) {
			t.Errorf("%s: the connection opened before the fault no longer works: %q, %v", c.step, who, err)
		}
	}
	t.Logf("%d runtimes, each killed once after one step, Ready in %s", len(cases), time.Since(start).Round(time.Millisecond))
}
