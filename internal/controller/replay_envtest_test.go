package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// replaySet is the suite operator's Options.ReplayMigrations: the runtimes
// whose new schema is built by replaying the migrations, as an upgrade
// does. A new tenant's one-step install builds no index concurrently, so
// the scenarios of the blocker watch (another tenant's or a DBA's
// snapshot holding a concurrent build back) mark their runtime here.
type replaySet struct {
	mu sync.Mutex
	m  map[types.NamespacedName]bool
}

func (r *replaySet) add(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[types.NamespacedName]bool{}
	}
	r.m[key] = true
}

func (r *replaySet) has(key types.NamespacedName) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[key]
}
