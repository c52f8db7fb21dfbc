package kubectlengram

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/demo"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/server"
	"github.com/engram-dev/engram/internal/testenv"
	"github.com/engram-dev/engram/internal/testenv/tenanttest"
	"github.com/engram-dev/engram/internal/workload"
)

// startService runs a memory service of a fresh tenant on 127.0.0.1 and
// returns its URL and admin token.
func startService(t *testing.T, ctx context.Context) (string, string) {
	t.Helper()
	tn := tenanttest.Provision(t, ctx, testenv.NewDatabase(t), "engram_plug", 384)
	dir := t.TempDir()
	token, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(token+" role=admin name=admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	cfg := memory.ServiceConfig{Schema: tn.Schema, Embedding: memory.EmbeddingConfig{Provider: memory.ProviderBuiltin, Dimensions: 384},
		Policy: memory.DefaultPolicy(), PolicyName: "test"}
	if err := workload.WriteServiceConfig(cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config=" + cfgPath, "--tokens-file=" + tokens, "--listen=127.0.0.1:0", "--metrics-listen=0",
		"--rate-limit-per-minute=0", "--llm-rate-limit-per-minute=0", "--shutdown-delay=0"}
	env := map[string]string{naming.EnvDatabaseURL: tn.LoginURL}
	opts, err := server.ParseFlags(args, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	proc, err := server.Start(sctx, *opts, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = proc.Wait()
	})
	return "http://" + proc.Addr().String(), token
}

// TestExportImportCommands: `export` writes a tenant's data to stdout,
// `import` writes it into another runtime in several requests of whole
// owners (a small --max-request-bytes), a second import inserts nothing,
// and both runtimes then export the same records.
func TestExportImportCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	urlA, tokA := startService(t, ctx)
	urlB, tokB := startService(t, ctx)
	api := &demo.API{Base: urlA, Token: tokA}
	for i := range 12 {
		owner := fmt.Sprintf("user-%d", i%3)
		if err := api.Do(ctx, "POST", "/v1/owners/"+owner+"/memories", map[string]any{"content": fmt.Sprintf("%s fact %d about gardening", owner, i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	exportOf := func(url, token string) (string, string) {
		out, errOut, code := Main2(ctx, "export", "rt", "--url", url, "--service-token", token, "--vectors", "--kubeconfig", "/nonexistent")
		if code != 0 {
			t.Fatalf("export: exit %d: %s", code, errOut)
		}
		return out, errOut
	}
	file, summary := exportOf(urlA, tokA)
	if !strings.Contains(summary, "Exported 24 records in 1 part(s): history 12, memory 12.") {
		t.Errorf("export summary %q", summary)
	}
	path := filepath.Join(t.TempDir(), "a.jsonl")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	imp := func() string {
		out, errOut, code := Main2(ctx, "import", "rt", "-f", path, "--max-request-bytes", "12000", "--url", urlB, "--service-token", tokB, "--kubeconfig", "/nonexistent")
		if code != 0 {
			t.Fatalf("import: exit %d: %s", code, errOut)
		}
		return out
	}
	if out := imp(); !strings.Contains(out, "Imported 3 owner(s) in 3 request(s): inserted history 12, memory 12") {
		t.Errorf("import: %q", out)
	}
	if out := imp(); !strings.Contains(out, "inserted nothing; already there history 12, memory 12") {
		t.Errorf("second import: %q", out)
	}
	fileB, _ := exportOf(urlB, tokB)
	if got, want := records(fileB), records(file); got != want {
		t.Errorf("B's export differs from A's:\n%s\n---\n%s", got, want)
	}
	// A changed line is refused before anything is sent.
	bad := strings.Replace(file, "gardening", "gardenin", 1)
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := Main2(ctx, "import", "rt", "-f", path, "--url", urlB, "--service-token", tokB, "--kubeconfig", "/nonexistent")
	if code != 1 || !strings.Contains(errOut, "does not match its trailer") {
		t.Errorf("import of a changed file: exit %d, %q", code, errOut)
	}
}

// records are an export's data lines (headers, checkpoints and trailers
// hold per-tenant fields).
func records(export string) string {
	var b bytes.Buffer
	for _, l := range strings.Split(export, "\n") {
		if strings.HasPrefix(l, `{"kind" : "`) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
