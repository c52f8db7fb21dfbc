package controller

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// The status metrics describe the objects, not the operator's work: one
// series per runtime and per retention job, read from the manager's cache
// at scrape time (no API request, nothing kept between scrapes). The
// dashboard and the alerts of config/grafana and config/prometheus use them
// for what the short-lived job pods cannot export themselves.
var (
	descRuntimeReady = prometheus.NewDesc("engram_memoryruntime_ready",
		"1 when the MemoryRuntime's Ready condition is True, else 0.", []string{"namespace", "runtime", "reason"}, nil)
	descCredentialsWritten = prometheus.NewDesc("engram_memoryruntime_credentials_last_written_timestamp_seconds",
		"When the operator last wrote the login role's password into the <runtime>-db Secret (creation or rotation).", []string{"namespace", "runtime"}, nil)
	descLastRunCompletion = prometheus.NewDesc("engram_retentionjob_last_run_completion_timestamp_seconds",
		"When the newest finished run of a RetentionJob ended.", []string{"namespace", "retentionjob", "runtime", "result"}, nil)
	descLastRunFailed = prometheus.NewDesc("engram_retentionjob_last_run_failed",
		"1 when the newest finished run of a RetentionJob failed, else 0.", []string{"namespace", "retentionjob", "runtime"}, nil)
	descLastRunDuration = prometheus.NewDesc("engram_retentionjob_last_run_duration_seconds",
		"Wall time of the newest finished run of a RetentionJob.", []string{"namespace", "retentionjob", "runtime"}, nil)
	descLastRunAffected = prometheus.NewDesc("engram_retentionjob_last_run_affected_rows",
		"Rows the newest finished run changed (or, dry, would change), per operation.", []string{"namespace", "retentionjob", "runtime", "operation"}, nil)
	descLastSuccess = prometheus.NewDesc("engram_retentionjob_last_success_timestamp_seconds",
		"When a run of the RetentionJob last succeeded (its creation time until one did).", []string{"namespace", "retentionjob"}, nil)
	descScheduleInterval = prometheus.NewDesc("engram_retentionjob_schedule_interval_seconds",
		"Time between two scheduled runs of the RetentionJob (0 while suspended).", []string{"namespace", "retentionjob"}, nil)
)

// statusCollector exports the status metrics of the newest manager set up
// in this process (tests and the demo may start several, one after another).
type statusCollector struct {
	reader atomic.Pointer[client.Reader]
}

var statusMetrics = &statusCollector{}

func init() { metrics.Registry.MustRegister(statusMetrics) }

// use makes the collector read from r (the manager's cached client).
func (c *statusCollector) use(r client.Reader) { c.reader.Store(&r) }

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRuntimeReady, descCredentialsWritten, descLastRunCompletion, descLastRunFailed,
		descLastRunDuration, descLastRunAffected, descLastSuccess, descScheduleInterval} {
		ch <- d
	}
}

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	rp := c.reader.Load()
	if rp == nil {
		return
	}
	// The cache answers from memory; the timeout only guards a cache
	// that has not synced yet.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	collectRuntimes(ctx, *rp, ch)
	collectRetentionJobs(ctx, *rp, ch)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func collectRuntimes(ctx context.Context, r client.Reader, ch chan<- prometheus.Metric) {
	var list memoryv1alpha1.MemoryRuntimeList
	if err := r.List(ctx, &list); err != nil {
		return
	}
	for _, rt := range list.Items {
		ready, reason := 0.0, ""
		if cond := rt.GetCondition(memoryv1alpha1.ConditionReady); cond != nil {
			reason = cond.Reason
			if cond.Status == metav1.ConditionTrue {
				ready = 1
			}
		}
		gauge(ch, descRuntimeReady, ready, rt.Namespace, rt.Name, reason)
		var sec corev1.Secret
		if err := r.Get(ctx, client.ObjectKey{Namespace: rt.Namespace, Name: naming.CredentialsSecretName(rt.Name)}, &sec); err == nil {
			gauge(ch, descCredentialsWritten, float64(lastWritten(&sec.ObjectMeta).Unix()), rt.Namespace, rt.Name)
		}
	}
}

// lastWritten is the newest write of an object: its creation or the latest
// time of its managed fields (the operator's apply of a new password).
func lastWritten(m *metav1.ObjectMeta) time.Time {
	last := m.CreationTimestamp.Time
	for _, mf := range m.ManagedFields {
		if mf.Time != nil && mf.Time.After(last) {
			last = mf.Time.Time
		}
	}
	return last
}

func collectRetentionJobs(ctx context.Context, r client.Reader, ch chan<- prometheus.Metric) {
	var list memoryv1alpha1.RetentionJobList
	if err := r.List(ctx, &list); err != nil {
		return
	}
	now := time.Now()
	for _, rj := range list.Items {
		success := rj.CreationTimestamp.Time
		if rj.Status.LastSuccessfulTime != nil {
			success = rj.Status.LastSuccessfulTime.Time
		}
		gauge(ch, descLastSuccess, float64(success.Unix()), rj.Namespace, rj.Name)
		gauge(ch, descScheduleInterval, scheduleInterval(&rj, now).Seconds(), rj.Namespace, rj.Name)
		lr := rj.Status.LastRun
		if lr == nil || lr.CompletionTime == nil {
			continue
		}
		failed := 0.0
		if lr.Result == memoryv1alpha1.RunFailed {
			failed = 1
		}
		gauge(ch, descLastRunCompletion, float64(lr.CompletionTime.Unix()), rj.Namespace, rj.Name, lr.Runtime, string(lr.Result))
		gauge(ch, descLastRunFailed, failed, rj.Namespace, rj.Name, lr.Runtime)
		if lr.StartTime != nil {
			gauge(ch, descLastRunDuration, lr.CompletionTime.Sub(lr.StartTime.Time).Seconds(), rj.Namespace, rj.Name, lr.Runtime)
		}
		for _, op := range lr.Operations {
			gauge(ch, descLastRunAffected, float64(op.Affected), rj.Namespace, rj.Name, lr.Runtime, string(op.Name))
		}
	}
}

// scheduleInterval is the time between the next two scheduled runs, 0
// while suspended or when the schedule cannot be parsed.
func scheduleInterval(rj *memoryv1alpha1.RetentionJob, now time.Time) time.Duration {
	if rj.Spec.Suspend {
		return 0
	}
	first, err := specs.NextSchedule(rj.Spec.Schedule, rj.Spec.TimeZone, now)
	if err != nil {
		return 0
	}
	second, err := specs.NextSchedule(rj.Spec.Schedule, rj.Spec.TimeZone, first)
	if err != nil {
		return 0
	}
	return second.Sub(first)
}

// MetricNames are the names of Engram's own operator metrics, from their
// descriptors: a series of most of them exists only once there is
// something to count (a provisioning, a finished run), so a scrape of a
// fresh operator cannot list them. The metrics-name check of the dashboard
// and the alerts (test/observability) uses it.
func MetricNames() []string {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range []prometheus.Collector{statusMetrics, provisionSeconds, provisionChanges, passwordRotations, reclaims, runNowJobs} {
			c.Describe(ch)
		}
		close(ch)
	}()
	var names []string
	for d := range ch {
		names = append(names, descName(d))
	}
	return names
}

// descName reads the fqName out of a Desc's String() (the client library
// has no accessor): `Desc{fqName: "name", ...}`.
func descName(d *prometheus.Desc) string {
	s := d.String()
	const key = `fqName: "`
	i := strings.Index(s, key)
	if i < 0 {
		return ""
	}
	s = s[i+len(key):]
	return s[:strings.IndexByte(s, '"')]
}
