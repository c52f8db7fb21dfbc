package controller

import "sync"

// perNode is what a nodeJob keeps per node, by node key. The nodeRunner
// runs each node in a goroutine of its own, so every access is locked.
type perNode[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// get returns the node's state; when there is none, the one mk makes
// (kept), or the zero value when mk is nil.
func (s *perNode[T]) get(key string, mk func() T) T {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	if !ok && mk != nil {
		v = mk()
		s.put(key, v)
	}
	return v
}

// set keeps v as the node's state.
func (s *perNode[T]) set(key string, v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.put(key, v)
}

// swap keeps v as the node's state and returns the one it had.
func (s *perNode[T]) swap(key string, v T) T {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.m[key]
	s.put(key, v)
	return old
}

// forget drops the node's state (nodeJob.forget).
func (s *perNode[T]) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

func (s *perNode[T]) put(key string, v T) {
	if s.m == nil {
		s.m = map[string]T{}
	}
	s.m[key] = v
}
