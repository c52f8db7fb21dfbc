package controller

import (
	"encoding/json"
	"reflect"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// An object of the operator's that a team pushed over the cache's size cap
// is a stub in the cache, and comparing it with what the operator wants
// means reading it whole from the API server (getWhole). A team can make its
// runtime reconcile back to back, so doing that at every reconcile would
// let it spend the operator's CPU and workers decoding megabytes that have
// not changed. stubMemo remembers, per object, the resourceVersion at which
// the whole object was found to hold what the operator wants, and the hash
// of that want: while neither changes, the stub is enough. A change of the
// object (a new resourceVersion) or of the want (a new hash) reads it again.

// stubMemoEntries bounds the memo: one entry per object, at most this many;
// past it the entry remembered first is dropped (first in, first out). A
// dropped object is read whole once more at its next apply, nothing worse.
const stubMemoEntries = 1024

// maxMemoStatus bounds the status an entry keeps (JSON bytes): a status
// over it (only someone allowed to write the status subresource makes one)
// is not remembered, and the object is read whole at each apply as before.
const maxMemoStatus = 8 << 10

type stubMemo struct {
	mu      sync.Mutex
	entries map[types.UID]stubMemoEntry
	order   []types.UID // the keys of entries, oldest first
}

type stubMemoEntry struct {
	resourceVersion, hash string
	// status is an empty object of the kind with only the status it had at
	// that resourceVersion (nil: the caller needs none), for callers that
	// read it (a Deployment's rollout, a CronJob's last schedule).
	status client.Object
}

// recall returns the entry of the object with uid, when it was remembered at
// resourceVersion rv for the want of hash.
func (m *stubMemo) recall(uid types.UID, rv, hash string) (stubMemoEntry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[uid]
	if !ok || e.resourceVersion != rv || e.hash != hash {
		return stubMemoEntry{}, false
	}
	return e, true
}

// remember notes that the object with uid held, at rv, what the want of hash
// asks, with status (may be nil). The entry replaces the object's earlier one.
func (m *stubMemo) remember(uid types.UID, rv, hash string, status client.Object) {
	if uid == "" || rv == "" || hash == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = make(map[types.UID]stubMemoEntry)
	}
	if _, known := m.entries[uid]; !known {
		if len(m.order) >= stubMemoEntries {
			delete(m.entries, m.order[0])
			m.order[0] = "" // nothing kept alive by the old backing array
			m.order = m.order[1:]
		}
		m.order = append(m.order, uid)
	}
	m.entries[uid] = stubMemoEntry{resourceVersion: rv, hash: hash, status: status}
}

func (m *stubMemo) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// statusOnly returns an empty object of obj's type holding only a copy of
// obj's status; nil when the kind has no status; ok false when the status is
// over maxMemoStatus.
func statusOnly(obj client.Object) (client.Object, bool) {
	st := reflect.ValueOf(obj).Elem().FieldByName("Status")
	if !st.IsValid() {
		return nil, true
	}
	b, err := json.Marshal(st.Interface())
	if err != nil || len(b) > maxMemoStatus {
		return nil, false
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	reflect.ValueOf(out).Elem().FieldByName("Status").Set(st)
	return out.DeepCopyObject().(client.Object), true
}

// copyStatus sets obj's status to a copy of from's (both of one type).
func copyStatus(obj, from client.Object) {
	if from == nil {
		return
	}
	src := reflect.ValueOf(from.DeepCopyObject()).Elem().FieldByName("Status")
	reflect.ValueOf(obj).Elem().FieldByName("Status").Set(src)
}
