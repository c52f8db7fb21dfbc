package controller

import (
	"crypto/sha256"
	"sync"
	"time"
)

// failureLogEvery: a session the watchdog cannot end is found again at
// every look (each second); its error is logged once per this, per
// session.
const failureLogEvery = time.Minute

// maxFailuresLoggedPerNode bounds the sessions remembered per node. A
// tenant-run server names the pids, and can name new ones at every look;
// past this, the look logs one "and N more" line instead.
const maxFailuresLoggedPerNode = 64

// nodeID is a node key's fixed-size digest: a node key is as long as the
// tenant's URL makes it, and the failure log must not keep copies of it.
type nodeID [sha256.Size]byte

func nodeIDOf(key string) nodeID { return sha256.Sum256([]byte(key)) }

// nodeFailures is one node's part of the failure log.
type nodeFailures struct {
	logged map[int]time.Time // by pid: when last logged
	more   int               // failures this look left unlogged (the node's memory full)
}

// failureLog remembers which sessions that could not be ended were logged
// within failureLogEvery, so that a watchdog whose connection user may not
// signal does not log an error per session per second. It holds at most
// maxFailuresLoggedPerNode fixed-size entries per node, pruned once per
// look (startLook), never scanned per call.
type failureLog struct {
	mu    sync.Mutex // each node runs in a goroutine of its own
	nodes map[nodeID]*nodeFailures
}

func newFailureLog() *failureLog { return &failureLog{nodes: map[nodeID]*nodeFailures{}} }

// node returns node id's part, made if new. Called with l.mu held.
func (l *failureLog) node(id nodeID) *nodeFailures {
	f := l.nodes[id]
	if f == nil {
		f = &nodeFailures{logged: map[int]time.Time{}}
		l.nodes[id] = f
	}
	return f
}

// startLook drops node key's entries older than failureLogEvery and
// resets its count of unlogged failures.
func (l *failureLog) startLook(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.node(nodeIDOf(key))
	for pid, at := range f.logged {
		if now.Sub(at) > failureLogEvery {
			delete(f.logged, pid)
		}
	}
	f.more = 0
}

// first reports whether session pid of node key is to be logged now: not
// logged within failureLogEvery, and room left to remember it. A failure
// without room is counted for endLook's summary.
func (l *failureLog) first(key string, pid int, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.node(nodeIDOf(key))
	if at, ok := f.logged[pid]; ok && now.Sub(at) <= failureLogEvery {
		return false
	}
	if _, ok := f.logged[pid]; !ok && len(f.logged) >= maxFailuresLoggedPerNode {
		f.more++
		return false
	}
	f.logged[pid] = now
	return true
}

// endLook returns how many failures of node key's look went unlogged
// because its memory was full.
func (l *failureLog) endLook(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.nodes[nodeIDOf(key)]; f != nil {
		return f.more
	}
	return 0
}

// forget drops node key's part.
func (l *failureLog) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.nodes, nodeIDOf(key))
}

// size is the number of sessions remembered, all nodes together.
func (l *failureLog) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, f := range l.nodes {
		n += len(f.logged)
	}
	return n
}
