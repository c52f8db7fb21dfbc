package server

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// TestUnavailableDatabase: a server whose database URL points at a closed
// loopback port starts, stays alive (/healthz 200), is not ready (/readyz
// 503) and answers API requests with 503 problems and Retry-After.
func TestUnavailableDatabase(t *testing.T) {
	srv := startServer(t, serverSetup{databaseURL: closedPortURL(t), config: testConfig("engram_nowhere")})
	srv.do(t, req{method: "GET", path: "/healthz", noAuth: true}).want(t, 200)
	if p := srv.do(t, req{method: "GET", path: "/readyz", noAuth: true}).want(t, 503).problem(t); p.Type != ProblemBase+"unavailable" {
		t.Fatalf("readyz problem %+v", p)
	}
	for _, rq := range []req{
		{method: "POST", path: memPath("dave", "memories"), body: map[string]any{"content": "Dave plays chess"}},
		{method: "GET", path: memPath("dave", "memories")},
		{method: "POST", path: memPath("dave", "search"), body: map[string]any{"query": "chess"}},
		{method: "DELETE", path: memPath("dave")},
	} {
		r := srv.do(t, rq).want(t, 503)
		if p := r.problem(t); p.Type != ProblemBase+"unavailable" || r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s: %+v, Retry-After %q", rq.method, rq.path, p, r.header.Get("Retry-After"))
		}
	}
	// Bad input is still 4xx: validation happens before the database.
	srv.do(t, req{method: "POST", path: memPath("dave", "memories"), body: `{"content":`}).want(t, 400)
	if logs := srv.logs.String(); strings.Contains(logs, "secret@") || strings.Contains(logs, ":secret") {
		t.Fatal("the log contains the database password")
	}
}

// TestLoadSheddingAndUpstream: with --max-inflight=1 and an embeddings API
// that holds the first request, a second API request is shed with 429 and
// Retry-After while probes still answer; once released the first completes.
// Then an embeddings API that fails gives 502 upstream.
func TestLoadSheddingAndUpstream(t *testing.T) {
	tn := newTenant(t)
	emb := newFakeEmbeddings(t)
	srv := startServer(t, serverSetup{databaseURL: tn.loginURL, config: emb.config(tn.schema),
		args: []string{"--max-inflight=1"}, env: map[string]string{naming.EnvEmbeddingAPIKey: "sk-test"}})

	emb.setBlock(true)
	first := make(chan *response, 1)
	go func() {
		first <- srv.do(t, req{method: "POST", path: memPath("erin", "memories"), body: map[string]any{"content": "Erin collects vinyl records"}})
	}()
	select {
	case <-emb.arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the first request never reached the embeddings API")
	}
	r := srv.do(t, req{method: "GET", path: memPath("erin", "memories")}).want(t, 429)
	if p := r.problem(t); p.Type != ProblemBase+"overloaded" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("429: %+v Retry-After %q", p, r.header.Get("Retry-After"))
	}
	srv.do(t, req{method: "GET", path: "/healthz", noAuth: true}).want(t, 200)
	srv.do(t, req{method: "GET", path: "/readyz", noAuth: true}).want(t, 200)
	emb.unblock()
	if r := <-first; r.status != 201 {
		t.Fatalf("the held request ended with %d %s", r.status, r.body)
	}
	srv.do(t, req{method: "GET", path: memPath("erin", "memories")}).want(t, 200)
	if m := srv.scrape(t); !strings.Contains(m, "engram_http_shed_requests_total 1") {
		t.Error("/metrics does not count the shed request")
	}

	emb.setFail(true)
	r = srv.do(t, req{method: "POST", path: memPath("erin", "search"), body: map[string]any{"query": "records", "mode": "vector"}}).want(t, 502)
	if p := r.problem(t); p.Type != ProblemBase+"upstream" || strings.Contains(p.Detail, "sk-test") {
		t.Fatalf("502: %+v", p)
	}
	if m := srv.scrape(t); !strings.Contains(m, `engram_upstream_errors_total{service="embedding"} 1`) {
		t.Error("/metrics does not count the embedding error")
	}
	if strings.Contains(srv.logs.String(), "sk-test") {
		t.Error("the log contains the embedding API key")
	}
}

// TestGracefulShutdown: when the context of Start ends (SIGTERM in
// `manager serve`), /readyz fails at once, new connections are refused, the
// in-flight request still completes, and Wait returns cleanly.
func TestGracefulShutdown(t *testing.T) {
	tn := newTenant(t)
	emb := newFakeEmbeddings(t)
	srv := startServer(t, serverSetup{databaseURL: tn.loginURL, config: emb.config(tn.schema)})
	emb.setBlock(true)
	inflight := make(chan *response, 1)
	go func() {
		inflight <- srv.do(t, req{method: "POST", path: memPath("frank", "memories"), body: map[string]any{"content": "Frank sails on weekends"}})
	}()
	<-emb.arrived

	srv.cancel() // what SIGTERM does in cmd/manager
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(srv.base + "/healthz")
		if err == nil {
			resp.Body.Close()
		} else {
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Logf("after shutdown started: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the listener still accepts connections after shutdown started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case r := <-inflight:
		t.Fatalf("the in-flight request ended before it was released: %d %s", r.status, r.body)
	default:
	}
	emb.unblock()
	r := <-inflight
	if r.status != 201 {
		t.Fatalf("the in-flight request got %d %s, want 201", r.status, r.body)
	}
	done := make(chan error, 1)
	go func() { done <- srv.proc.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the server did not stop")
	}
	srv.stopped = true
	// The memory was committed before the pool closed.
	var n int
	if err := tn.admin.QueryRow(context.Background(), `SELECT count(*) FROM `+tn.schema+`.memories WHERE owner_id = 'frank'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("frank has %d memories (%v), want 1", n, err)
	}
}

// TestTokenRotation: tokens are re-read from the file without a restart:
// add a second token, both work; remove the first, it gets 401; an empty
// file locks everyone out; comments and blank lines are ignored.
func TestTokenRotation(t *testing.T) {
	_, srv := newServedTenant(t)
	oldTok, newTok := srv.token, "rotated-"+srv.token
	path := memPath("gina", "memories")
	status := func(tok string) int {
		srv.token = tok
		return srv.do(t, req{method: "GET", path: path}).status
	}
	// Written whole and renamed into place, as the kubelet swaps a mounted
	// Secret: an in-place rewrite could be read half-written (empty) and
	// refuse a token the test expects to work.
	write := func(content string) {
		tmp := srv.tokens + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, srv.tokens); err != nil {
			t.Fatal(err)
		}
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		testenv.EventuallyTrue(t, what, 10*time.Second, cond)
	}

	if status(oldTok) != 200 || status(newTok) != 401 {
		t.Fatal("initial tokens wrong")
	}
	write(oldTok + "\n\n# rotation in progress\n  " + newTok + "  \n")
	eventually("the new token works", func() bool { return status(newTok) == 200 })
	if status(oldTok) != 200 {
		t.Fatal("the old token stopped working while both are listed")
	}
	write(newTok + "\n")
	eventually("the old token is refused", func() bool { return status(oldTok) == 401 })
	if status(newTok) != 200 {
		t.Fatal("the new token stopped working")
	}
	write("# no tokens\n\n")
	eventually("an empty file refuses every token", func() bool { return status(newTok) == 401 })
	if err := os.Remove(srv.tokens); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if status(newTok) != 401 {
		t.Fatal("a missing file must refuse every token")
	}
	write(newTok)
	eventually("a recreated file is read", func() bool { return status(newTok) == 200 })
	logs := srv.logs.String()
	if strings.Contains(logs, newTok) || strings.Contains(logs, oldTok) {
		t.Fatal("a token was logged")
	}
	if !strings.Contains(logs, "no bearer token is accepted") {
		t.Error("an empty or missing tokens file is not logged")
	}
	srv.token = newTok
}

// TestStartRefusesBadConfig: the service does not start on an invalid
// config, and says why.
func TestStartRefusesBadConfig(t *testing.T) {
	cfg := testConfig("engram_bad")
	cfg.Policy.Dedup.AutoMergeThreshold = 2
	path := writeConfig(t, cfg)
	var stderr strings.Builder
	code := Main(context.Background(), []string{"--config=" + path, "--tokens-file=/nonexistent", "--listen=127.0.0.1:0"},
		func(k string) string {
			if k == naming.EnvDatabaseURL {
				return "postgres://u:p@127.0.0.1:1/db"
			}
			return ""
		}, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "dedup") {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	stderr.Reset()
	if code := Main(context.Background(), []string{"--listen=127.0.0.1:0"}, func(string) string { return "" }, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "--config is required") || !strings.Contains(stderr.String(), naming.EnvDatabaseURL) {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
}
