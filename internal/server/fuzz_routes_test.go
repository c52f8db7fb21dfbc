package server

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
)

// knockCounter listens on 127.0.0.1 and counts the connections made to it,
// closing each at once: a database that never answers, which tells the
// fuzzer whether a request got as far as the store.
type knockCounter struct {
	ln    net.Listener
	count atomic.Int64
}

func newKnockCounter(tb testing.TB) *knockCounter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	k := &knockCounter{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			k.count.Add(1)
			c.Close()
		}
	}()
	tb.Cleanup(func() { ln.Close() })
	return k
}

// settle waits until no connection has come for 50 ms. A request that
// reached the database may leave a second connection attempt in flight
// after it was answered (pgxpool's), which must not count for the next one.
func (k *knockCounter) settle() {
	for {
		n := k.count.Load()
		time.Sleep(50 * time.Millisecond)
		if k.count.Load() == n {
			return
		}
	}
}

// routeFuzzServer is the real Server (routes, authentication, owner
// binding, validation, store) over a database that counts connections.
func routeFuzzServer(tb testing.TB) (*Server, *knockCounter, map[auth.Role]string) {
	knock := newKnockCounter(tb)
	pool, err := pgxpool.New(context.Background(),
		fmt.Sprintf("postgres://engram:pw@%s/engram?sslmode=disable&connect_timeout=2", knock.ln.Addr()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	emb, err := memory.NewBuiltinEmbedder(testDims)
	if err != nil {
		tb.Fatal(err)
	}
	store, err := memory.New(memory.Config{Pool: pool, Schema: "engram_fuzz", Policy: memory.DefaultPolicy(), Embedder: emb})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(store.Close)
	// Tokens bound to owner alice, one per role below admin.
	tokens := map[auth.Role]string{}
	var lines []string
	for _, r := range []auth.Role{auth.RoleAgent, auth.RoleApp} {
		tok, err := auth.NewToken()
		if err != nil {
			tb.Fatal(err)
		}
		tokens[r] = tok
		lines = append(lines, auth.TokenLine(tok, r, "alice", "fuzz-"+string(r)))
	}
	path := filepath.Join(tb.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		tb.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	m := NewMetrics()
	srv := New(Deps{Store: store, Pool: pool, Schema: "engram_fuzz", Tokens: NewTokens(path, "", logger, m), Metrics: m, Logger: logger})
	return srv, knock, tokens
}

// ownerSegment is the owner a path names, read the way ServeMux reads a
// wildcard (one escaped segment, then unescaped), or "" when it names none.
func ownerSegment(r *http.Request) (string, bool) {
	segs := strings.Split(r.URL.EscapedPath(), "/")
	if len(segs) < 4 || segs[0] != "" || segs[1] != "v1" || segs[2] != "owners" {
		return "", false
	}
	owner, err := url.PathUnescape(segs[3])
	return owner, err == nil
}

// FuzzRequestPath sends any method, path and body, as net/http parses
// them off the wire, with a token bound to owner alice. However the path
// is spelt (escapes, dot segments, doubled slashes, other owners), a
// request for another owner is refused before any handler runs and never
// reaches the database, and no request is answered 500.
func FuzzRequestPath(f *testing.F) {
	srv, knock, tokens := routeFuzzServer(f)
	handler := srv.Handler()
	f.Fuzz(func(t *testing.T, method, target string, body []byte, app bool) {
		token := tokens[auth.RoleAgent]
		if app {
			token = tokens[auth.RoleApp]
		}
		raw := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: engram\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			method, target, token, len(body), body)
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // net/http refuses it before any handler runs
		}
		if p := r.URL.Path; p == "/mcp" || strings.HasPrefix(p, "/mcp/") || p == "/readyz" {
			return // the MCP tools check the owner per call (mcp_auth_test); readyz pings
		}
		r.RemoteAddr = "127.0.0.1:1"
		before := knock.count.Load()
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, r)
		reached := knock.count.Load() != before
		if reached {
			defer knock.settle()
		}
		if rec.Code == http.StatusInternalServerError {
			t.Fatalf("%s %q answered 500: %s", method, target, rec.Body)
		}
		if rec.Code >= 200 && rec.Code < 300 && strings.HasPrefix(r.URL.Path, "/v1") {
			t.Fatalf("%s %q answered %d without a database", method, target, rec.Code)
		}
		owner, named := ownerSegment(r)
		// Another owner is refused before any handler runs: by routing
		// (404, 405), authentication (401) or the binding (403). Anything
		// else (a 422 of the engine, a 503 of the database) means a
		// handler ran for an owner the token may not act for.
		early := rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden ||
			rec.Code == http.StatusNotFound || rec.Code == http.StatusMethodNotAllowed
		if named && owner != "" && owner != "alice" && !early {
			t.Fatalf("%s %q for owner %q answered %d: %s", method, target, owner, rec.Code, rec.Body)
		}
		// The database as a second witness. A knock during an early refusal
		// is a late one of an earlier request (settle bounds those).
		if reached && !early && (!named || owner != "alice") {
			t.Fatalf("%s %q reached the database for owner %q (named %v); answered %d %s", method, target, owner, named, rec.Code, rec.Body)
		}
	})
}
