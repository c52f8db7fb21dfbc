package faults

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
	"github.com/engram-dev/engram/internal/testenv/tenanttest"
	"github.com/engram-dev/engram/internal/workload"
)

// requestTimeout is the service's --request-timeout; no call may take
// much longer, whatever the database does.
const requestTimeout = 5 * time.Second

// service is a real `manager serve` process for one tenant.
type service struct {
	base   string
	token  string
	client *http.Client
	cmd    *exec.Cmd
	logs   *syncBuffer
}

func buildManager(t *testing.T) string { return testenv.BuildManager(t) }

// writeConfig writes the service config the operator would mount (the
// <runtime>-config ConfigMap) for a builtin embedder and the default policy.
func writeConfig(t *testing.T, schema string, dims int) string {
	t.Helper()
	cfg := memory.ServiceConfig{Schema: schema, Policy: memory.DefaultPolicy(),
		Embedding: memory.EmbeddingConfig{Provider: memory.ProviderBuiltin, Dimensions: dims}}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := workload.WriteServiceConfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// provision creates a tenant of a fresh schema named after prefix on the
// instance as the operator would, dropped when the test ends (after the
// services the test starts later have stopped), and returns the schema and
// the login role's URL.
func provision(t *testing.T, ctx context.Context, adminURL, prefix string) (schema, login string) {
	t.Helper()
	tn := tenanttest.Provision(t, ctx, adminURL, prefix, 384)
	return tn.Schema, tn.LoginURL
}

func startService(t *testing.T, bin, databaseURL, schema string, extraArgs ...string) *service {
	t.Helper()
	dir := t.TempDir()
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	token := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.WriteFile(filepath.Join(dir, "tokens"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := writeConfig(t, schema, 384)
	addr := freeAddr(t)
	args := append([]string{"serve", "--config=" + config, "--tokens-file=" + filepath.Join(dir, "tokens"),
		"--listen=" + addr, "--request-timeout=" + requestTimeout.String(), "--log-level=info",
		// No metrics listener, and no rate limit: the writers share one token
		// and write as fast as the machine allows; only outages may fail them.
		"--metrics-listen=0", "--rate-limit-per-minute=0"}, extraArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), naming.EnvDatabaseURL+"="+databaseURL)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &service{base: "http://" + addr, token: token, cmd: cmd, logs: logs,
		client: &http.Client{Timeout: requestTimeout + 5*time.Second}}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("service log, warnings and errors (the last %d):\n%s", logTail, logs.notable(logTail))
		}
	})
	s.waitReady(t, 30*time.Second)
	return s
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitReady polls /readyz until it answers 200.
func (s *service) waitReady(t *testing.T, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		resp, err := s.client.Get(s.base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("/readyz did not answer 200 within %s", within)
	return 0
}

// outcome is one API call as the client saw it.
type outcome struct {
	status     int
	problem    string // the problem's type, for errors
	retryAfter string
	took       time.Duration
	err        error // transport error
	body       []byte
	requestID  string // sent as X-Request-Id: the service logs the request under it
}

func (s *service) call(ctx context.Context, method, path string, body any) outcome {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return outcome{err: err}
	}
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "faults-"+hex.EncodeToString(id))
	start := time.Now()
	resp, err := s.client.Do(req)
	o := outcome{took: time.Since(start), err: err, requestID: req.Header.Get("X-Request-Id")}
	if err != nil {
		return o
	}
	defer resp.Body.Close()
	o.status, o.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	o.body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		var p struct {
			Type string `json:"type"`
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") && json.Unmarshal(o.body, &p) == nil {
			o.problem = p.Type
		} else {
			o.problem = fmt.Sprintf("not problem+json (%s)", resp.Header.Get("Content-Type"))
		}
	}
	return o
}
