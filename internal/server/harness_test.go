package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
	"github.com/engram-dev/engram/internal/testenv/tenanttest"
	"github.com/engram-dev/engram/internal/workload"
)

// testDims is the embedding size of the test tenants.
const testDims = 256

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// testTenant is a provisioned tenant on a fresh database.
type testTenant struct {
	adminURL string
	admin    *pgxpool.Pool
	schema   string
	// owner is the runtime the tenant belongs to.
	owner    tenant.Owner
	loginURL string
}

// newTenant provisions a tenant with tenant.Provision on a fresh database;
// the tenant's roles are dropped when the test ends (the database too).
func newTenant(t *testing.T) *testTenant {
	t.Helper()
	tn, _ := provisionTenant(t, testenv.NewDatabase(t), "engram_srv")
	return tn
}

// serve starts a service on the tenant: startServer with its login URL
// and testConfig; s sets the rest (tokens, args, env, clock).
func (tn *testTenant) serve(t *testing.T, s serverSetup) *testServer {
	t.Helper()
	s.databaseURL, s.config = tn.loginURL, testConfig(tn.schema)
	return startServer(t, s)
}

// newServedTenant is newTenant and its service with nothing more (serve).
func newServedTenant(t *testing.T) (*testTenant, *testServer) {
	t.Helper()
	tn := newTenant(t)
	return tn, tn.serve(t, serverSetup{})
}

// provisionTenant provisions a tenant of a fresh schema named after prefix
// on the database of adminURL; its roles are dropped when the test ends.
func provisionTenant(t *testing.T, adminURL, prefix string) (*testTenant, *tenant.Result) {
	t.Helper()
	admin := testenv.NewPool(t, adminURL, 4)
	tn := tenanttest.Provision(t, testCtx(t), adminURL, prefix, testDims)
	return &testTenant{adminURL: adminURL, admin: admin, schema: tn.Schema, owner: tn.Owner, loginURL: tn.LoginURL}, tn.Result
}

// testConfig is the service config of the tests: the default policy with
// the identity category protected (to test 403 protected).
func testConfig(schema string) memory.ServiceConfig {
	p := memory.DefaultPolicy()
	for i := range p.Categories {
		if p.Categories[i].Name == "identity" {
			p.Categories[i].Protected = true
		}
	}
	return memory.ServiceConfig{
		Schema:     schema,
		Embedding:  memory.EmbeddingConfig{Provider: memory.ProviderBuiltin, Dimensions: testDims},
		Policy:     p,
		PolicyName: "test", PolicyGeneration: 1,
	}
}

// writeConfig writes cfg as YAML, the way the operator's ConfigMap holds it.
func writeConfig(t *testing.T, cfg memory.ServiceConfig) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := workload.WriteServiceConfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// testServer is a memory service started in-process through the same path
// as `manager serve` (flags, environment, config file, Start).
type testServer struct {
	t    *testing.T
	proc *Process
	base string
	// metrics is the base URL of the metrics listener.
	metrics string
	token   string // an admin token (role=admin name=test-admin)
	// tokens and signingKeyFile are the paths of the credential files;
	// signingKey is the key of the latter.
	tokens         string
	signingKeyFile string
	signingKey     []byte
	client         *http.Client
	logs           *testenv.SyncBuffer
	cancel         context.CancelFunc
	stopped        bool
}

type serverSetup struct {
	databaseURL string
	config      memory.ServiceConfig
	args        []string // extra flags
	env         map[string]string
	tokens      []string         // more lines of the tokens file
	clock       func() time.Time // the rate limits' clock; nil: time.Now
}

// startServer starts a service listening on 127.0.0.1:0 with an admin
// token (plus s.tokens) and a signing key.
func startServer(t *testing.T, s serverSetup) *testServer {
	t.Helper()
	dir := t.TempDir()
	token := newTestToken(t)
	tokensPath := filepath.Join(dir, "tokens")
	lines := append([]string{"# the test token", token + " role=admin name=test-admin"}, s.tokens...)
	if err := os.WriteFile(tokensPath, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keyText, err := auth.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "signing-key")
	if err := os.WriteFile(keyPath, []byte(keyText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, _ := auth.ParseSigningKeys([]byte(keyText))
	args := append([]string{
		"--config=" + writeConfig(t, s.config),
		"--tokens-file=" + tokensPath,
		"--signing-key-file=" + keyPath,
		"--listen=127.0.0.1:0",
		"--metrics-listen=127.0.0.1:0",
		// Off unless a test asks: most tests send as fast as they can with
		// one token, and must not depend on the machine's speed
		// (ratelimit_test.go tests the limits).
		"--rate-limit-per-minute=0",
		"--llm-rate-limit-per-minute=0",
		"--log-level=debug",
		"--tokens-poll-interval=50ms",
		"--shutdown-timeout=10s",
		"--shutdown-delay=0",
	}, s.args...)
	env := map[string]string{naming.EnvDatabaseURL: s.databaseURL}
	for k, v := range s.env {
		env[k] = v
	}
	opts, err := ParseFlags(args, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatalf("ParseFlags(%q): %v", args, err)
	}
	opts.clock = s.clock
	logs := &testenv.SyncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	proc, err := Start(ctx, *opts, logger)
	if err != nil {
		cancel()
		t.Fatalf("Start: %v", err)
	}
	ts := &testServer{t: t, proc: proc, base: "http://" + proc.Addr().String(), token: token, tokens: tokensPath,
		metrics:        "http://" + proc.MetricsAddr().String(),
		signingKeyFile: keyPath, signingKey: keys.MintKey(),
		client: &http.Client{Timeout: 60 * time.Second}, logs: logs, cancel: cancel}
	t.Cleanup(func() {
		ts.stop()
		if t.Failed() {
			t.Logf("server log %s", failureLog(logs.String()))
		}
	})
	return ts
}

// newTestToken is a fresh static token of the generated kind.
func newTestToken(t *testing.T) string {
	t.Helper()
	tok, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// stop shuts the server down and waits for it.
func (s *testServer) stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	s.cancel()
	if err := s.proc.Wait(); err != nil {
		s.t.Errorf("server stopped with: %v", err)
	}
	s.client.CloseIdleConnections()
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

func (r *response) problem(t *testing.T) Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("status %d with Content-Type %q, want application/problem+json; body %s", r.status, ct, r.body)
	}
	var p Problem
	r.decode(t, &p)
	return p
}

// req describes a request; body is JSON-encoded unless it is a string or
// []byte (sent as is).
type req struct {
	method, path string
	body         any
	header       map[string]string
	noAuth       bool
	token        string // instead of the server's admin token
}

// do sends r with the server's token and validates the response against
// the OpenAPI document (status documented, body matching its schema).
func (s *testServer) do(t *testing.T, r req) *response {
	t.Helper()
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(js)
	}
	hr, err := http.NewRequest(r.method, s.base+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if !r.noAuth {
		hr.Header.Set("Authorization", "Bearer "+cmp.Or(r.token, s.token))
	}
	for k, v := range r.header {
		if v == "" {
			hr.Header.Del(k)
		} else {
			hr.Header.Set(k, v)
		}
	}
	resp, err := s.client.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s %s: %v", r.method, r.path, err)
	}
	out := &response{status: resp.StatusCode, header: resp.Header, body: raw}
	checkAgainstOpenAPI(t, r.method, hr.URL.EscapedPath(), out)
	return out
}

// want fails unless the response has status.
func (r *response) want(t *testing.T, status int) *response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	return r
}

// scrape reads GET /metrics of the metrics listener.
func (s *testServer) scrape(t *testing.T) string {
	t.Helper()
	resp, err := s.client.Get(s.metrics + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: status %d, %v", resp.StatusCode, err)
	}
	return string(body)
}

// closedPortURL returns a postgres URL on a loopback port nothing listens on.
func closedPortURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "postgres://nobody:secret@" + addr + "/engram?sslmode=disable&connect_timeout=2"
}
