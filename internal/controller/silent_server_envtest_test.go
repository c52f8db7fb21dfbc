package controller

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// silentServer is what a tenant's connectionSecretRef may name: a server
// of its own (a pod of its namespace) that logs anyone in and then never
// answers a query. It listens on 127.0.0.1 and counts the provisioning
// passes waiting on it (connections whose first query is the provisioning's
// first statement, which reads pg_extension) at once.
type silentServer struct {
	ln net.Listener
	mu sync.Mutex
	// conns are closed by stop, so every pass waiting on the server fails
	// at once.
	conns            map[net.Conn]struct{}
	waiting, maxWait int
	stopped          bool
}

func newSilentServer(t *testing.T) *silentServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentServer{ln: ln, conns: map[net.Conn]struct{}{}}
	t.Cleanup(s.stop)
	go s.accept()
	return s
}

func (s *silentServer) url() string {
	return fmt.Sprintf("postgres://owner:pw@%s/engram?sslmode=disable", s.ln.Addr())
}

func (s *silentServer) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		go s.serve(c)
	}
}

// serve logs the client in (no password asked) and reads its first
// message, which it never answers.
func (s *silentServer) serve(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 8 || n > 1<<16 {
		return
	}
	if _, err := io.CopyN(io.Discard, c, int64(n)-8); err != nil {
		return
	}
	if binary.BigEndian.Uint32(hdr[4:]) != 196608 { // not a StartupMessage (SSL or cancel request)
		return
	}
	login := []byte{'R', 0, 0, 0, 8, 0, 0, 0, 0, // AuthenticationOk
		'K', 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 2, // BackendKeyData
		'Z', 0, 0, 0, 5, 'I'} // ReadyForQuery
	if _, err := c.Write(login); err != nil {
		return
	}
	var msg [5]byte
	if _, err := io.ReadFull(c, msg[:]); err != nil {
		return
	}
	body := make([]byte, min(binary.BigEndian.Uint32(msg[1:]), 1<<16)-4)
	if _, err := io.ReadFull(c, body); err != nil {
		return
	}
	// A pass begins by asking the server which it is (checkConnection),
	// then provisions (its first statement reads pg_extension).
	pass := bytes.Contains(body, []byte("current_database()")) || bytes.Contains(body, []byte("pg_extension"))
	if pass {
		s.mu.Lock()
		s.waiting++
		s.maxWait = max(s.maxWait, s.waiting)
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.waiting--
			s.mu.Unlock()
		}()
	}
	_, _ = io.Copy(io.Discard, c) // no answer, ever
}

// passes returns how many passes wait on the server now, and the most
// that ever did at once.
func (s *silentServer) passes() (now, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting, s.maxWait
}

func (s *silentServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	s.ln.Close()
	for c := range s.conns {
		c.Close()
	}
}

// scenarioSilentTenantServer (issue 26's sixth review, HIGH 2): a
// connectionSecretRef may name a server the tenant runs, which logs the
// operator in and never answers. Each pass waited for --migration-timeout
// (30 min), and the operator reconciles 4 runtimes at once, so four such
// runtimes stopped the provisioning of every other tenant. Now one
// namespace holds at most one reconcile worker at a time, and a pass on a
// tenant's own server ends at --tenant-server-timeout (60 s): with four
// silent runtimes in one namespace, a runtime of another namespace is
// DatabaseReady while the silent pass still waits (waitCondition's 30 s,
// under the silent pass's 60 s), only one silent pass ever waits at once,
// and the silent pass ends at its bound with a condition that names it.
func scenarioSilentTenantServer(e *operatorEnv, t *testing.T) {
	srv := newSilentServer(t)
	ns := e.newNamespace(t, "silent")
	sec := connectionSecret(ns, "own", srv.url())
	mustCreate(t, e.c, sec)
	var silent []client.Object
	for i := range 4 {
		rt := newRuntime(ns, fmt.Sprintf("silent-%d", i), "")
		rt.Spec.Database = memoryv1alpha1.DatabaseSpec{ConnectionSecretRef: &memoryv1alpha1.SecretKeySelector{Name: sec.Name}}
		// Nothing to drop on deletion: the server is gone by then.
		rt.Spec.ReclaimPolicy = memoryv1alpha1.ReclaimRetain
		e.createRuntime(t, rt)
		silent = append(silent, rt)
	}
	defer func() {
		srv.stop()
		e.deleteAndWait(t, silent...)
	}()
	eventually(t, "a pass waiting on the silent server", 30*time.Second, func() error {
		if now, _ := srv.passes(); now == 0 {
			return fmt.Errorf("no pass waits on it yet")
		}
		return nil
	})
	waitingSince := time.Now()

	other := e.newNamespace(t, "silent-other")
	e.createRuntime(t, newRuntime(other, "bot", ""))
	e.waitCondition(t, other, "bot", memoryv1alpha1.ConditionDatabaseReady, true, "")
	took := time.Since(waitingSince)
	t.Logf("the other namespace's runtime was DatabaseReady %s after a silent pass began", took.Round(time.Millisecond))
	if took >= e.runtimes.opts.TenantServerTimeout {
		t.Errorf("the other namespace's runtime was DatabaseReady %s after the silent passes began: it waited for one to end", took.Round(time.Millisecond))
	}
	if _, most := srv.passes(); most != 1 {
		t.Errorf("%d passes of one namespace waited on its silent server at once; want 1 (one reconcile worker per namespace)", most)
	}

	// The silent pass ends at --tenant-server-timeout, not --migration-timeout.
	bound := e.runtimes.opts.TenantServerTimeout
	eventually(t, "a silent runtime's pass ending at --tenant-server-timeout", bound+30*time.Second, func() error {
		for _, o := range silent {
			rt := &memoryv1alpha1.MemoryRuntime{}
			if err := e.get(t, ns, o.GetName(), rt); err != nil {
				return err
			}
			c := meta.FindStatusCondition(rt.Status.Conditions, memoryv1alpha1.ConditionDatabaseReady)
			if c != nil && strings.Contains(c.Message, "--tenant-server-timeout "+bound.String()) {
				if c.Status != "False" || c.Reason != memoryv1alpha1.ReasonDatabaseUnreachable {
					return fmt.Errorf("%s: DatabaseReady %s (%s); want False (%s)", rt.Name, c.Status, c.Reason, memoryv1alpha1.ReasonDatabaseUnreachable)
				}
				return nil
			}
		}
		return fmt.Errorf("no silent runtime says its pass ran out of --tenant-server-timeout yet")
	})
}
