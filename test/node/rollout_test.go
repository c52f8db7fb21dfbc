package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// newRuntime is a runtime like the sample's (builtin embeddings, the
// "main" connection) with replicas and a memory limit of its own (the
// request is the limit, or 64Mi when the limit is higher).
func newRuntime(ns, name string, replicas int32, memLimit string) *memoryv1alpha1.MemoryRuntime {
	request := resource.MustParse("64Mi")
	if limit := resource.MustParse(memLimit); limit.Cmp(request) < 0 {
		request = limit
	}
	return &memoryv1alpha1.MemoryRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: memoryv1alpha1.MemoryRuntimeSpec{
			Database:  memoryv1alpha1.DatabaseSpec{ClusterConnection: connectionName},
			Embedding: memoryv1alpha1.EmbeddingSpec{Provider: memoryv1alpha1.EmbeddingBuiltin, Dimensions: 384},
			Service: memoryv1alpha1.ServiceSpec{
				Replicas: ptr.To(replicas),
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: request},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memLimit)},
				},
			},
		},
	}
}

// testRollout: spec.service.replicas 1 -> 3 rolls out with the real
// Deployment controller while a client writes and reads through the
// Service: no call fails, kstatus says InProgress until 3 of 3 replicas
// are available, then Current. Then a change of the Pod template rolls
// all three Pods under the same client, again without a failed call.
func (e *env) testRollout(t *testing.T) {
	ctx := scenarioCtx(t, 8*time.Minute)
	ns := e.namespace(t, "rollout")
	rt := newRuntime(ns, "scale", 1, "256Mi")
	if err := e.cl.c.Create(ctx, rt); err != nil {
		t.Fatal(err)
	}
	rt = e.waitReady(t, ns, "scale")
	s := e.service(t, ns, "scale")

	load := startLoad(ctx, s, "rollout")
	defer load.stop()
	if err := load.waitFor(ctx, 5); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"spec":{"service":{"replicas":3}}}`)
	if err := e.cl.c.Patch(ctx, rt, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var seen []status.Status
	err := poll(ctx, 200*time.Millisecond, func() (bool, error) {
		res, err := e.kstatus(ctx, rt)
		if err != nil {
			return false, err
		}
		if len(seen) == 0 || seen[len(seen)-1] != res.Status {
			seen = append(seen, res.Status)
		}
		if res.Status != status.CurrentStatus {
			return false, nil
		}
		// Current: the Deployment must have every replica by now.
		d, err := e.deployment(ctx, ns, "scale")
		if err != nil {
			return false, err
		}
		if d.Status.AvailableReplicas < 3 || d.Status.UpdatedReplicas < 3 {
			return false, fmt.Errorf("kstatus Current with %d/%d replicas available", d.Status.AvailableReplicas, 3)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the rollout to 3 replicas: %v (kstatus went %v)", err, seen)
	}
	if seen[0] != status.InProgressStatus {
		t.Errorf("kstatus went %v after the change, want InProgress first", seen)
	}
	t.Logf("1 -> 3 replicas in %s; kstatus went %v", time.Since(start).Round(100*time.Millisecond), seen)
	// Some more calls, which now land on the new Pods too.
	if err := load.waitFor(ctx, load.ok()+20); err != nil {
		t.Fatal(err)
	}

	// A change of the Pod template replaces all three Pods (the
	// Deployment's default strategy: maxSurge 1, maxUnavailable 0 of 3),
	// each old one draining as the kubelet stops it, under the same client.
	old := podNames(e.servicePods(t, ns, "scale"))
	patch = []byte(`{"spec":{"service":{"resources":{"requests":{"cpu":"60m"}}}}}`)
	if err := e.cl.c.Patch(ctx, rt, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	err = poll(ctx, 500*time.Millisecond, func() (bool, error) {
		res, err := e.kstatus(ctx, rt)
		if err != nil || res.Status != status.CurrentStatus {
			return false, err
		}
		pods := e.servicePods(t, ns, "scale")
		for _, p := range pods {
			if old[p.Name] {
				return false, nil // Current, but an old Pod still terminates
			}
		}
		return len(pods) == 3, nil
	})
	if err != nil {
		t.Fatalf("the rolling update: %v\n%s", err, e.cl.describePods(ns))
	}
	t.Logf("rolling update of 3 Pods in %s", time.Since(start).Round(100*time.Millisecond))
	if err := load.waitFor(ctx, load.ok()+20); err != nil {
		t.Fatal(err)
	}
	load.stop()
	load.check(t, ctx, s)
	if len(e.servicePods(t, ns, "scale")) != 3 {
		t.Errorf("%d service Pods, want 3", len(e.servicePods(t, ns, "scale")))
	}
}

func podNames(pods []corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, p := range pods {
		out[p.Name] = true
	}
	return out
}

// kstatus computes what kstatus (Flux, Argo CD, kubectl wait) says of rt.
func (e *env) kstatus(ctx context.Context, rt *memoryv1alpha1.MemoryRuntime) (*status.Result, error) {
	if err := e.cl.c.Get(ctx, client.ObjectKeyFromObject(rt), rt); err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rt)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(memoryv1alpha1.GroupVersion.WithKind("MemoryRuntime"))
	return status.Compute(u)
}

// load is a client that adds a memory and reads it back, again and again,
// through the Service, until stopped (at most maxCalls pairs, 10 minutes).
type load struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	acked  []string // ids of acknowledged adds
	fails  []string
}

const maxCalls = 5000

func startLoad(parent context.Context, s *svc, owner string) *load {
	ctx, cancel := context.WithTimeout(parent, 10*time.Minute)
	l := &load{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for i := 0; i < maxCalls && ctx.Err() == nil; i++ {
			l.one(ctx, s, owner, i)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return l
}

func (l *load) one(ctx context.Context, s *svc, owner string, i int) {
	res, err := s.add(ctx, owner, fmt.Sprintf("fact number %d of the load", i))
	if err == nil {
		var got addedMemory
		err = s.do(ctx, http.MethodGet, "/v1/owners/"+owner+"/memories/"+res.Memory.ID, nil, &got.Memory)
		if err == nil && got.Memory.ID != res.Memory.ID {
			err = fmt.Errorf("read %q back as %q", res.Memory.ID, got.Memory.ID)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		// stopped mid-call
	case err != nil:
		l.fails = append(l.fails, fmt.Sprintf("call %d: %v", i, err))
	}
	if res != nil && res.Memory.ID != "" {
		l.acked = append(l.acked, res.Memory.ID)
	}
}

func (l *load) ok() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// waitFor waits until n adds were acknowledged.
func (l *load) waitFor(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := poll(ctx, 100*time.Millisecond, func() (bool, error) { return l.ok() >= n, nil })
	if err != nil {
		return fmt.Errorf("the client got %d of %d acknowledged writes: %w (failures: %v)", l.ok(), n, err, l.failures())
	}
	return nil
}

func (l *load) failures() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.fails...)
}

func (l *load) stop() {
	l.cancel()
	<-l.done
}

// check fails on any failed call and on any acknowledged write that cannot
// be read back now.
func (l *load) check(t *testing.T, ctx context.Context, s *svc) {
	t.Helper()
	if f := l.failures(); len(f) > 0 {
		t.Errorf("%d of %d calls failed: %v", len(f), len(l.acked), f)
	}
	l.checkAcked(t, ctx, s, "rollout")
}

// checkAcked reads every acknowledged write back.
func (l *load) checkAcked(t *testing.T, ctx context.Context, s *svc, owner string) {
	t.Helper()
	l.mu.Lock()
	ids := append([]string(nil), l.acked...)
	l.mu.Unlock()
	lost := 0
	for _, id := range ids {
		var got addedMemory
		if err := s.doPaced(ctx, http.MethodGet, "/v1/owners/"+owner+"/memories/"+id, nil, &got.Memory); err != nil {
			lost++
			t.Errorf("acknowledged write %s: %v", id, err)
		}
	}
	t.Logf("%d acknowledged writes, %d lost, %d failed calls", len(ids), lost, len(l.failures()))
}
