package memory

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestConnectionLossIsUnavailable: the errors a real connection loss gives
// the engine are ErrUnavailable (the service answers 503 with Retry-After),
// whatever the statement was doing. Each case has a store call wait for a
// lock that an admin session holds, then breaks its connection:
//   - closed without a word, as a backend waiting for a lock exits when
//     the postmaster is killed (-9): pgx returns a bare io.ErrUnexpectedEOF,
//     which answered 500 before (the fault suite's kill -9, issue 26);
//   - terminated by the server (pg_terminate_backend: FATAL 57P01, what a
//     fast shutdown sends);
//
// and the pool cannot connect (nothing listens) or is closed (shutdown).
func TestConnectionLossIsUnavailable(t *testing.T) {
	f := newFixture(t)
	seed := f.add(AddRequest{Owner: "lossy", Content: "Lossy keeps a spare key under the mat", Source: SourceUser})
	calls := []struct {
		name string
		lock string // what the admin session locks, so the call waits
		call func(ctx context.Context, s *Store) error
	}{
		{"pipelined add waiting for the owner's lock", `SELECT 1 FROM ` + f.store.sql.ownerLocks + ` WHERE owner_id = 'lossy' FOR UPDATE`,
			func(ctx context.Context, s *Store) error {
				_, err := s.Add(ctx, AddRequest{Owner: "lossy", Content: "Lossy moved the key to the shed", Source: SourceUser})
				return err
			}},
		{"update waiting for the memory's row", `SELECT 1 FROM ` + f.store.sql.memories + ` WHERE id = '` + seed.Memory.ID + `' FOR UPDATE`,
			func(ctx context.Context, s *Store) error {
				imp := 7
				_, err := s.Update(ctx, UpdateRequest{Owner: "lossy", ID: seed.Memory.ID, Importance: &imp, Source: SourceUser})
				return err
			}},
	}
	breaks := []struct {
		name  string
		apply func(t *testing.T, p *cutProxy, pid uint32)
	}{
		{"connection closed without a word", func(t *testing.T, p *cutProxy, _ uint32) { p.cut() }},
		{"backend terminated (57P01)", func(t *testing.T, _ *cutProxy, pid uint32) {
			if _, err := f.admin.Exec(ctx(t), `SELECT pg_terminate_backend($1::int)`, pid); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range calls {
		for _, b := range breaks {
			t.Run(c.name+"/"+b.name, func(t *testing.T) {
				proxy := startCutProxy(t, f.loginURL)
				s := storeVia(t, f, proxy.url)
				pid := backendPID(t, s)
				tx, err := f.admin.Begin(ctx(t))
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback(context.Background()) }()
				if _, err := tx.Exec(ctx(t), c.lock); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- c.call(ctx(t), s) }()
				waitForLockWait(t, f, pid)
				b.apply(t, proxy, pid)
				err = <-done
				if !errors.Is(err, ErrUnavailable) || !IsUnavailable(err) {
					t.Fatalf("error %v is not ErrUnavailable", err)
				}
			})
		}
	}
	t.Run("nothing listens", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		s := storeVia(t, f, withHost(t, f.loginURL, addr))
		if _, err := s.Get(ctx(t), "lossy", seed.Memory.ID); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("a store whose database does not listen: %v, want ErrUnavailable", err)
		}
	})
	t.Run("pool closed", func(t *testing.T) {
		s := storeVia(t, f, f.loginURL)
		s.core.Pool.Close()
		if _, err := s.Get(ctx(t), "lossy", seed.Memory.ID); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("a store whose pool is closed: %v, want ErrUnavailable", err)
		}
	})
}

// storeVia opens a Store on f's tenant through rawURL, one connection.
func storeVia(t *testing.T, f *fixture, rawURL string) *Store {
	t.Helper()
	pool, err := NewPool(ctx(t), rawURL, 1, SessionSettings{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := New(Config{Pool: pool, Schema: f.store.core.Schema, Policy: f.store.core.Policy, Embedder: f.store.core.Embedder})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// backendPID is the backend of s's only connection.
func backendPID(t *testing.T, s *Store) uint32 {
	t.Helper()
	var pid uint32
	if err := s.core.Pool.QueryRow(ctx(t), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitForLockWait waits until backend pid waits for a lock.
func waitForLockWait(t *testing.T, f *fixture, pid uint32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting bool
		if err := f.admin.QueryRow(ctx(t), lockWaitQuery(), pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the call did not wait for the lock within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lockWaitQuery says whether backend $1 waits for a lock. On Citus the
// coordinator's backend waits for its worker, and the lock wait is the
// worker backend's: citus_stat_activity lists both under one global pid
// (the coordinator's node id times 10^10 plus its pid).
func lockWaitQuery() string {
	if testenv.OnCitus() {
		return `SELECT EXISTS (SELECT 1 FROM citus_stat_activity WHERE global_pid % 10000000000 = $1 AND wait_event_type = 'Lock')`
	}
	return `SELECT coalesce((SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1), false)`
}

func withHost(t *testing.T, rawURL, hostPort string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = hostPort
	return u.String()
}

// cutProxy forwards TCP to PostgreSQL on 127.0.0.1 until cut closes every
// connection at once, as a backend that exits does.
type cutProxy struct {
	url   string
	mu    sync.Mutex
	conns []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{url: withHost(t, target, l.Addr().String())}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); p.cut() })
	return p
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}
