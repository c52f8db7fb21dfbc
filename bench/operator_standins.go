package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/localpod"
)

// deploymentStandIn does the one thing of the deployment controller and the
// kubelet that the operator waits for, which envtest (an API server and etcd,
// nothing else) lacks: it marks each Deployment's rollout as complete —
// observedGeneration, replicas updated/ready/available and the Available
// condition — as the deployment controller would once the pods run. It
// writes only when a Deployment's status is not already complete, so an
// idle system stays idle.
type deploymentStandIn struct {
	c       client.Client
	cache   cache.Cache
	queue   workqueue.TypedRateLimitingInterface[types.NamespacedName]
	patches atomic.Int64
	errors  atomic.Int64
}

func newDeploymentStandIn(ctx context.Context, c client.Client, ca cache.Cache) (*deploymentStandIn, error) {
	d := &deploymentStandIn{c: c, cache: ca,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())}
	inf, err := ca.GetInformer(ctx, &appsv1.Deployment{})
	if err != nil {
		return nil, err
	}
	enqueue := func(obj any) {
		if o, ok := obj.(client.Object); ok {
			d.queue.Add(client.ObjectKeyFromObject(o))
		}
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, n any) { enqueue(n) },
	})
	return d, err
}

// run patches with workers until ctx is done.
func (d *deploymentStandIn) run(ctx context.Context, workers int) {
	go func() { <-ctx.Done(); d.queue.ShutDown() }()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d.next(ctx) {
			}
		}()
	}
	wg.Wait()
}

func (d *deploymentStandIn) next(ctx context.Context) bool {
	key, quit := d.queue.Get()
	if quit {
		return false
	}
	defer d.queue.Done(key)
	if err := d.complete(ctx, key); err != nil && ctx.Err() == nil {
		d.errors.Add(1)
		d.queue.AddRateLimited(key)
		return true
	}
	d.queue.Forget(key)
	return true
}

// complete marks one Deployment's rollout as done, when it is not.
func (d *deploymentStandIn) complete(ctx context.Context, key types.NamespacedName) error {
	var dep appsv1.Deployment
	if err := d.cache.Get(ctx, key, &dep); err != nil {
		return client.IgnoreNotFound(err)
	}
	want := localpod.DesiredReplicas(&dep)
	if localpod.RolledOut(&dep, want) {
		return nil
	}
	patched := dep.DeepCopy()
	patched.Status = localpod.AvailableStatus(&dep, want)
	if err := d.c.Status().Patch(ctx, patched, client.MergeFrom(&dep)); err != nil {
		return client.IgnoreNotFound(err)
	}
	d.patches.Add(1)
	return nil
}

// readyTracker notes when each MemoryRuntime is first seen Ready (for its
// current generation), from a watch, so the harness does not poll the API.
type readyTracker struct {
	mu      sync.Mutex
	created map[types.NamespacedName]time.Time
	ready   map[types.NamespacedName]time.Time
	want    int
	all     chan struct{}
	closed  bool
}

func newReadyTracker(ctx context.Context, ca cache.Cache, want int) (*readyTracker, error) {
	t := &readyTracker{created: map[types.NamespacedName]time.Time{}, ready: map[types.NamespacedName]time.Time{}, want: want, all: make(chan struct{})}
	inf, err := ca.GetInformer(ctx, &memoryv1alpha1.MemoryRuntime{})
	if err != nil {
		return nil, err
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    t.observe,
		UpdateFunc: func(_, n any) { t.observe(n) },
	})
	return t, err
}

func (t *readyTracker) markCreated(key types.NamespacedName, at time.Time) {
	t.mu.Lock()
	t.created[key] = at
	t.mu.Unlock()
}

func (t *readyTracker) observe(obj any) {
	rt, ok := obj.(*memoryv1alpha1.MemoryRuntime)
	if !ok || rt.Status.ObservedGeneration != rt.Generation ||
		!meta.IsStatusConditionTrue(rt.Status.Conditions, memoryv1alpha1.ConditionReady) {
		return
	}
	key := client.ObjectKeyFromObject(rt)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.ready[key]; seen {
		return
	}
	t.ready[key] = time.Now()
	if len(t.ready) >= t.want && !t.closed {
		t.closed = true
		close(t.all)
	}
}

// latencies are, per runtime seen Ready, the time from its creation.
func (t *readyTracker) latencies() (ready int, lat []time.Duration, last time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, r := range t.ready {
		if c, ok := t.created[k]; ok {
			lat = append(lat, r.Sub(c))
		}
		if r.After(last) {
			last = r
		}
	}
	return len(t.ready), lat, last
}
