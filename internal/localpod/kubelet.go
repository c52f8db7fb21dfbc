// Package localpod plays kubelet (and the deployment and job controllers)
// for Engram on a machine without one: it runs the containers of the
// Deployments and Jobs the operator creates as local processes of the
// manager binary, with the environment, Secrets and ConfigMaps their pods
// would get, and writes back the status a cluster would report.
//
// It is honest about what it is: only the operator's objects (label
// app.kubernetes.io/managed-by=engram-operator), one replica per
// Deployment, every server on 127.0.0.1, and the image's /manager is the
// locally built binary. The demo and the e2e tests use it.
package localpod

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/naming"
)

// ManagedSelector selects the objects the local kubelet runs.
var ManagedSelector = client.MatchingLabels(naming.ManagedLabels())

// Kubelet runs the operator's Deployments and Jobs locally.
type Kubelet struct {
	// Client reads the objects and writes their status.
	Client client.Client
	// Binary is the local manager binary that stands in for the image's /manager.
	Binary string
	// Dir holds the materialized volumes and the logs of every process.
	Dir string
	// Interval between two looks at the API server; default 300ms.
	Interval time.Duration
	// Log receives one line per action.
	Log *slog.Logger

	mu       sync.Mutex
	services map[string]*process // by namespace/name of the Deployment
	backoff  map[string]crashLoop
	jobsDone map[string]bool // namespace/name of Jobs already run
}

// Endpoint returns the local URL of the memory service of Deployment
// namespace/name, or "" while it is not running.
func (k *Kubelet) Endpoint(namespace, name string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.services[namespace+"/"+name]; p != nil && p.alive() {
		return p.url
	}
	return ""
}

// Endpoints returns the local URLs of every running service, by namespace/name.
func (k *Kubelet) Endpoints() map[string]string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]string{}
	for key, p := range k.services {
		if p.alive() {
			out[key] = p.url
		}
	}
	return out
}

// Run reconciles until ctx ends, then stops every process it started.
func (k *Kubelet) Run(ctx context.Context) error {
	if k.Interval <= 0 {
		k.Interval = 300 * time.Millisecond
	}
	if k.Log == nil {
		k.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	k.mu.Lock()
	k.services, k.jobsDone, k.backoff = map[string]*process{}, map[string]bool{}, map[string]crashLoop{}
	k.mu.Unlock()
	if err := os.MkdirAll(k.Dir, 0o755); err != nil {
		return err
	}
	defer k.stopAll()
	tick := time.NewTicker(k.Interval)
	defer tick.Stop()
	for {
		if err := k.syncDeployments(ctx); err != nil && ctx.Err() == nil {
			k.Log.Warn("syncing deployments", "error", err)
		}
		if err := k.syncJobs(ctx); err != nil && ctx.Err() == nil {
			k.Log.Warn("syncing jobs", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// syncDeployments starts a process for every Deployment with replicas > 0,
// restarts it when the pod template changed (a rollout), and stops the
// processes of Deployments that are gone or scaled to 0.
func (k *Kubelet) syncDeployments(ctx context.Context) error {
	var list appsv1.DeploymentList
	if err := k.Client.List(ctx, &list, ManagedSelector); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range list.Items {
		d := &list.Items[i]
		key := d.Namespace + "/" + d.Name
		if d.DeletionTimestamp != nil || (d.Spec.Replicas != nil && *d.Spec.Replicas == 0) {
			continue
		}
		seen[key] = true
		if err := k.syncDeployment(ctx, key, d); err != nil {
			k.Log.Warn("running deployment", "deployment", key, "error", err)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, p := range k.services {
		if !seen[key] {
			k.Log.Info("stopping", "deployment", key)
			p.stop()
			delete(k.services, key)
		}
	}
	return nil
}

func (k *Kubelet) syncDeployment(ctx context.Context, key string, d *appsv1.Deployment) error {
	hash := templateHash(&d.Spec.Template)
	k.mu.Lock()
	cur := k.services[key]
	k.mu.Unlock()
	if cur != nil && cur.hash == hash && cur.alive() {
		return k.markAvailable(ctx, d, cur)
	}
	if cur != nil && cur.hash == hash && !cur.alive() {
		// Crashed: restart with a growing delay, like CrashLoopBackOff.
		k.mu.Lock()
		b := k.backoff[key]
		k.mu.Unlock()
		if time.Now().Before(b.next) {
			return nil
		}
		b.delay = min(max(2*b.delay, time.Second), 30*time.Second)
		b.next = time.Now().Add(b.delay)
		k.mu.Lock()
		k.backoff[key] = b
		k.mu.Unlock()
	} else if cur != nil {
		k.Log.Info("rolling out a new pod template", "deployment", key)
		cur.stop()
		k.mu.Lock()
		delete(k.backoff, key)
		k.mu.Unlock()
	}
	pod := newPodSpec(d.Namespace, d.Name, &d.Spec.Template)
	p, err := k.start(ctx, pod, filepath.Join(k.Dir, "deployments", d.Namespace, d.Name))
	if err != nil {
		return err
	}
	p.hash = hash
	k.mu.Lock()
	k.services[key] = p
	k.mu.Unlock()
	k.Log.Info("started", "deployment", key, "url", p.url, "pid", p.cmd.Process.Pid)
	if err := p.waitReady(ctx, 30*time.Second); err != nil {
		return fmt.Errorf("%s did not become ready: %w; log %s ends with:\n%s", key, err, p.logPath, logTail(p.logPath, 15))
	}
	return k.markAvailable(ctx, d, p)
}

// crashLoop is the restart delay of a crashing service.
type crashLoop struct {
	delay time.Duration
	next  time.Time
}

// syncJobs runs every Job that has not finished, once.
func (k *Kubelet) syncJobs(ctx context.Context) error {
	var list batchv1.JobList
	if err := k.Client.List(ctx, &list, ManagedSelector); err != nil {
		return err
	}
	for i := range list.Items {
		j := &list.Items[i]
		key := j.Namespace + "/" + j.Name
		k.mu.Lock()
		done := k.jobsDone[key]
		k.jobsDone[key] = true
		k.mu.Unlock()
		if done || finished(j) || j.DeletionTimestamp != nil {
			continue
		}
		if err := k.runJob(ctx, j); err != nil {
			k.Log.Warn("running job", "job", key, "error", err)
		}
	}
	return nil
}

func (k *Kubelet) stopAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, p := range k.services {
		p.stop()
		delete(k.services, key)
	}
}

// logTail returns the last n lines of a log file.
func logTail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
