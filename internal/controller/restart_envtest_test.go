package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// restarted is r as a newly started operator process builds it: nothing in
// runtimeMemory, no Secret read before. (The connection pools are shared:
// they hold connections, not decisions.)
func (r *MemoryRuntimeReconciler) restarted() *MemoryRuntimeReconciler {
	fresh := *r
	fresh.memory = newRuntimeMemory()
	fresh.placer = newPlacer()
	fresh.secrets = newSecretReader(r.secrets.meta, r.secrets.api, r.secrets.maxIdle)
	return &fresh
}

// scenarioRestartAndMetrics: runtimeMemory is only an optimization. A restarted
// operator (a new reconciler, empty memory) reconciling a Ready runtime
// whose credentials were rotated changes nothing: no rotation, no Secret
// rewrite, no rollout, no status write, no event. Then the operator's own
// metrics after reconciles: reconcile totals, errors and durations
// (controller-runtime's), runtimes by state, rotations and provisionings
// (Engram's).
func scenarioRestartAndMetrics(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "restart")
	e.readyRuntime(t, newRuntime(ns, "bot", ""))
	rotations := testutil.ToFloat64(passwordRotations.WithLabelValues("requested"))
	e.rotate(t, ns, "bot", "first")
	if got := testutil.ToFloat64(passwordRotations.WithLabelValues("requested")); got != rotations+1 {
		t.Errorf("engram_operator_password_rotations_total{reason=requested} = %v, want %v", got, rotations+1)
	}
	// The new password is in the pod template: the Deployment rolls out.
	e.markAvailable(t, ns, "bot")
	e.waitKStatus(t, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}}, status.CurrentStatus, "")
	e.settle(t, ns)

	before := e.botObjects(t, ns)
	// Successful provisionings only: a runtime of an earlier subtest whose
	// admin password is wrong (TenantBoundary's badpw) keeps failing in the
	// background operator, and each failure is observed in the same histogram.
	okOnly := map[string]string{"result": "ok"}
	provisions := histogramCountWith(t, "engram_operator_provision_duration_seconds", okOnly)
	mark := e.writes.count()
	fresh := e.runtimes.restarted()
	for range 2 {
		if _, err := fresh.Reconcile(testContext(t), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "bot"}}); err != nil {
			t.Fatalf("reconcile of a restarted operator: %v", err)
		}
	}
	if got := histogramCountWith(t, "engram_operator_provision_duration_seconds", okOnly); got != provisions+1 {
		t.Errorf("provisionings by the restarted operator: %v, want 1 (it verifies the tenant once, then remembers)", got-provisions)
	}
	var writes []string
	for _, w := range e.writes.since(mark) {
		if strings.Contains(w, "/namespaces/"+ns+"/") {
			writes = append(writes, w)
		}
	}
	if len(writes) > 0 {
		t.Errorf("a restarted operator wrote to a Ready runtime's namespace: %v", writes)
	}
	after := e.botObjects(t, ns)
	if after.secret.ResourceVersion != before.secret.ResourceVersion || string(after.secret.Data["password"]) != string(before.secret.Data["password"]) {
		t.Error("the restarted operator rewrote the credentials Secret")
	}
	if after.deploy.Generation != before.deploy.Generation || after.deploy.Spec.Template.Annotations[naming.AnnotationConfigHash] != before.deploy.Spec.Template.Annotations[naming.AnnotationConfigHash] {
		t.Error("the restarted operator rolled the Deployment out")
	}
	if after.rt.ResourceVersion != before.rt.ResourceVersion {
		t.Errorf("the restarted operator changed the runtime: status %+v", after.rt.Status)
	}
	if got := testutil.ToFloat64(passwordRotations.WithLabelValues("requested")); got != rotations+1 {
		t.Errorf("the restarted operator rotated the password again (%v rotations)", got-rotations)
	}
	ctx := testContext(t)
	conn, err := pgx.Connect(ctx, string(after.secret.Data["uri"]))
	if err != nil {
		t.Fatalf("the credentials Secret no longer logs in: %v", err)
	}
	_ = conn.Close(ctx)

	// controller-runtime's reconcile metrics, through a real reconcile of
	// the controller (a label change triggers one). Every result counts: a
	// Ready runtime's reconcile ends in requeue_after (the grant check).
	reconciles := counterValue(t, "controller_runtime_reconcile_total", map[string]string{"controller": "memoryruntime"})
	durations := histogramCountWith(t, "controller_runtime_reconcile_time_seconds", map[string]string{"controller": "memoryruntime"})
	update(t, e, after.rt, func(r *memoryv1alpha1.MemoryRuntime) { metav1.SetMetaDataLabel(&r.ObjectMeta, "touched", "yes") })
	eventually(t, "the reconcile is counted", 20*time.Second, func() error {
		if got := counterValue(t, "controller_runtime_reconcile_total", map[string]string{"controller": "memoryruntime"}); got <= reconciles {
			return fmt.Errorf("reconcile_total %v, before %v", got, reconciles)
		}
		if got := histogramCountWith(t, "controller_runtime_reconcile_time_seconds", map[string]string{"controller": "memoryruntime"}); got <= durations {
			return fmt.Errorf("reconcile_time_seconds count %v, before %v", got, durations)
		}
		return nil
	})

	// Errors and the runtimes by state: a runtime whose database cannot be
	// reached is counted as reconciling, and its failed reconciles as errors.
	errorsBefore := counterValue(t, "controller_runtime_reconcile_errors_total", map[string]string{"controller": "memoryruntime"})
	mustCreate(t, e.c, connectionSecret(e.opNS, "restart-down", fmt.Sprintf("postgres://x:y@127.0.0.1:%d/db?sslmode=disable&connect_timeout=2", closedPort(t))))
	down := newRuntime(ns, "down", "")
	down.Spec.Database.ClusterConnection = "restart-down"
	e.createRuntime(t, down)
	eventually(t, "the failing reconciles and the runtime's state are counted", 30*time.Second, func() error {
		if got := counterValue(t, "controller_runtime_reconcile_errors_total", map[string]string{"controller": "memoryruntime"}); got <= errorsBefore {
			return fmt.Errorf("reconcile_errors_total %v, before %v", got, errorsBefore)
		}
		if got := gaugeValue(t, "engram_operator_runtimes", map[string]string{"state": "reconciling"}); got < 1 {
			return fmt.Errorf("engram_operator_runtimes{state=reconciling} = %v", got)
		}
		return nil
	})
	if got := gaugeValue(t, "engram_operator_runtimes", map[string]string{"state": "ready"}); got < 1 {
		t.Errorf("engram_operator_runtimes{state=ready} = %v, want at least this test's runtime", got)
	}
	if err := e.c.Delete(testContext(t), down); err != nil {
		t.Errorf("deleting the unreachable runtime: %v", err)
	}
}

// settle waits until the operator has made no write in ns for 2 s.
func (e *operatorEnv) settle(t *testing.T, ns string) {
	t.Helper()
	eventually(t, "the operator settles in "+ns, 30*time.Second, func() error {
		mark := e.writes.count()
		time.Sleep(2 * time.Second)
		for _, w := range e.writes.since(mark) {
			if strings.Contains(w, "/namespaces/"+ns+"/") {
				return fmt.Errorf("still writing: %s", w)
			}
		}
		return nil
	})
}

// metricsWith returns the samples of the named family whose labels include want.
func metricsWith(t *testing.T, name string, want map[string]string) []*dto.Metric {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	var out []*dto.Metric
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// metricSum adds value over the series of name that carry labels.
func metricSum(t *testing.T, name string, labels map[string]string, value func(*dto.Metric) float64) float64 {
	t.Helper()
	var sum float64
	for _, m := range metricsWith(t, name, labels) {
		sum += value(m)
	}
	return sum
}

func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return metricSum(t, name, labels, func(m *dto.Metric) float64 { return m.GetCounter().GetValue() })
}

func gaugeValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return metricSum(t, name, labels, func(m *dto.Metric) float64 { return m.GetGauge().GetValue() })
}

func histogramCountWith(t *testing.T, name string, labels map[string]string) uint64 {
	t.Helper()
	return uint64(metricSum(t, name, labels, func(m *dto.Metric) float64 { return float64(m.GetHistogram().GetSampleCount()) }))
}

// botObjects are what runtime "bot" of ns is made of and a restarted
// operator must not write: its credentials Secret, its Deployment, itself.
type botObjects struct {
	secret corev1.Secret
	deploy appsv1.Deployment
	rt     *memoryv1alpha1.MemoryRuntime
}

func (e *operatorEnv) botObjects(t *testing.T, ns string) *botObjects {
	t.Helper()
	o := &botObjects{rt: &memoryv1alpha1.MemoryRuntime{}}
	for _, g := range []struct {
		name string
		obj  client.Object
	}{{"bot-db", &o.secret}, {"bot", &o.deploy}, {"bot", o.rt}} {
		if err := e.get(t, ns, g.name, g.obj); err != nil {
			t.Fatal(err)
		}
	}
	return o
}
