package controller

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// closedPort returns a 127.0.0.1 port nothing listens on.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// scenarioDatabaseDown: an unreachable database is a condition with the error
// and one Warning event (not one per retry), retried with exponential
// backoff (no crash, no hot loop of connections or writes), and recovers by
// itself when the database comes back at the same address: the connection
// Secret is never edited.
func scenarioDatabaseDown(e *operatorEnv, t *testing.T) {
	// The database "down" lives at 127.0.0.1:port. First something there
	// accepts and hangs up at once, counting the operator's attempts; then
	// nothing listens (connection refused); then a proxy to the real
	// PostgreSQL takes the port: the database is back.
	refuser := startRefuser(t)
	port := refuser.port()
	u, err := url.Parse(e.adminURL)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	u.Host = fmt.Sprintf("127.0.0.1:%d", port)
	q := u.Query()
	q.Set("sslmode", "disable") // no TLS attempt: fewer connections per attempt to count
	u.RawQuery = q.Encode()
	down := connectionSecret(e.opNS, "down", u.String())
	mustCreate(t, e.c, down)
	secretVersion := down.ResourceVersion
	ns := e.newNamespace(t, "down")
	// Another tenant, in a namespace of its own (this one's writes are
	// counted), whose schema the recovered login role must not read.
	neighbour := newRuntime(e.newNamespace(t, "down-nb"), "other", "")
	e.createRuntime(t, neighbour)
	rt := newRuntime(ns, "bot", "")
	rt.Spec.Database.ClusterConnection = "down"
	created := time.Now()
	e.createRuntime(t, rt)
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonDatabaseUnreachable)
	if err := containsAll(got.GetCondition(memoryv1alpha1.ConditionDatabaseReady).Message, u.Host); err != nil {
		t.Error(err)
	}
	if c := got.GetCondition(memoryv1alpha1.ConditionReady); c.Reason != memoryv1alpha1.ReasonDatabaseUnreachable {
		t.Errorf("Ready = %+v", c)
	}

	// Backoff: the delay between attempts doubles (100 ms up to 2 s in this
	// suite), so the attempts of the first 3 s outnumber those of the next
	// 3 s, and far fewer are made than a fixed 100 ms retry would (60).
	// One attempt is a burst of connections under 5 ms apart (pgxpool
	// dials again once when a new connection fails).
	time.Sleep(time.Until(created.Add(6 * time.Second)))
	var attempts []time.Time
	for _, at := range refuser.attempts() {
		if n := len(attempts); n == 0 || at.Sub(attempts[n-1]) >= 5*time.Millisecond {
			attempts = append(attempts, at)
		}
	}
	var first, second int
	var gaps []string
	for i, at := range attempts {
		if at.Sub(created) < 3*time.Second {
			first++
		} else if at.Sub(created) < 6*time.Second {
			second++
		}
		if i > 0 {
			gaps = append(gaps, at.Sub(attempts[i-1]).Round(10*time.Millisecond).String())
		}
	}
	t.Logf("connection attempts in 0-3 s: %d, in 3-6 s: %d; gaps %v", first, second, gaps)
	if first < 3 || second >= first || first+second > 15 {
		t.Errorf("attempts %d in the first 3 s and %d in the next 3 s: not an exponential backoff (gaps %v)", first, second, gaps)
	}

	// The database now refuses connections: the condition follows the
	// error, and no second event is written for the same reason.
	refuser.close()
	eventually(t, "the condition reports the refused connection", 10*time.Second, func() error {
		var now memoryv1alpha1.MemoryRuntime
		if err := e.get(t, ns, "bot", &now); err != nil {
			return err
		}
		c := now.GetCondition(memoryv1alpha1.ConditionDatabaseReady)
		if c == nil || c.Reason != memoryv1alpha1.ReasonDatabaseUnreachable {
			return fmt.Errorf("DatabaseReady = %+v", c)
		}
		return containsAll(c.Message, "connection refused")
	})
	// Retrying rewrites neither the status (same reason and message) nor
	// an event: an API write per retry would never let the system idle.
	mark := e.writes.count()
	time.Sleep(3 * time.Second)
	statusWrites := 0
	for _, w := range e.writes.since(mark) {
		if strings.Contains(w, "/namespaces/"+ns+"/") {
			statusWrites++
		}
	}
	if statusWrites > 0 {
		t.Errorf("%d writes in 3 s while the database is down: %v", statusWrites, e.writes.since(mark))
	}
	var warnings []string
	for _, ev := range e.events(t, ns, "bot") {
		if ev.Reason == memoryv1alpha1.ReasonDatabaseUnreachable {
			warnings = append(warnings, fmt.Sprintf("%s %q series=%v", ev.Type, ev.Note, ev.Series))
			if ev.Type != corev1.EventTypeWarning || ev.Series != nil || !strings.Contains(ev.Note, u.Host) {
				t.Errorf("event %s %q (series %v): want one Warning naming %s", ev.Type, ev.Note, ev.Series, u.Host)
			}
		}
	}
	if len(warnings) != 1 {
		t.Errorf("%d DatabaseUnreachable events, want exactly 1: %v", len(warnings), warnings)
	}

	// The database comes back at the same address; nobody edits anything.
	startProxy(t, fmt.Sprintf("127.0.0.1:%d", port), target)
	back := time.Now()
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionDatabaseReady, true, memoryv1alpha1.ReasonProvisioned)
	t.Logf("DatabaseReady %s after the database came back", time.Since(back).Round(10*time.Millisecond))
	e.waitEvent(t, ns, "bot", memoryv1alpha1.ReasonProvisioned, "created schema")
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	var after corev1.Secret
	if err := e.get(t, e.opNS, down.Name, &after); err != nil || after.ResourceVersion != secretVersion {
		t.Errorf("the connection Secret was changed (%v): recovery must need no user action", err)
	}
	e.checkCredentials(t, ns, "bot", SchemaFor(e.waitReady(t, neighbour.Namespace, neighbour.Name)))

	// Delete the runtime (reclaimPolicy Retain) while the proxy still
	// runs: nothing may reconcile it through a closed port later (the idle
	// test watches every runtime).
	if err := e.c.Delete(testContext(t), rt); err != nil {
		t.Fatal(err)
	}
	waitRuntimeGone(t, e, ns, "bot", "the runtime is gone")
}

// refuser stands for a PostgreSQL that is down: it accepts TCP connections
// on 127.0.0.1 and closes them at once, recording when each came.
type refuser struct {
	l  net.Listener
	mu sync.Mutex
	at []time.Time
}

func startRefuser(t *testing.T) *refuser {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &refuser{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.at = append(r.at, time.Now())
			r.mu.Unlock()
			_ = c.Close()
		}
	}()
	t.Cleanup(r.close)
	return r
}

func (r *refuser) port() int { return r.l.Addr().(*net.TCPAddr).Port }

func (r *refuser) close() { _ = r.l.Close() }

func (r *refuser) attempts() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.at)
}

// startProxy forwards TCP connections on addr to target until the test ends.
func startProxy(t *testing.T, addr, target string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
}
