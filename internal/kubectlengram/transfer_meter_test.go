package kubectlengram

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// fakeTerminal is stderr as a terminal: what the plugin draws there.
type fakeTerminal struct{ bytes.Buffer }

// exportPartText is one part of a fake export of alice's records: a header
// counting the whole snapshot (4 records), recs, and a trailer over them.
func exportPartText(t *testing.T, after, next string, recs ...string) string {
	t.Helper()
	h, err := json.Marshal(memory.ExportHeader{Kind: memory.ExportKindHeader, FormatVersion: memory.ExportFormatVersion, Scope: "tenant",
		After: after, Counts: map[string]int64{memory.ExportKindMemory: 3, memory.ExportKindHistory: 1}})
	if err != nil {
		t.Fatal(err)
	}
	lines := append([]string{string(h)}, recs...)
	sum := sha256.New()
	counts := map[string]int64{}
	for _, l := range lines {
		sum.Write([]byte(l + "\n"))
		var env struct{ Kind string }
		_ = json.Unmarshal([]byte(l), &env)
		if env.Kind != memory.ExportKindHeader {
			counts[env.Kind]++
		}
	}
	tr, err := json.Marshal(memory.ExportTrailer{Kind: memory.ExportKindTrailer, Counts: counts, Lines: int64(len(lines)),
		SHA256: hex.EncodeToString(sum.Sum(nil)), Complete: next == "", Next: next})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(append(lines, string(tr)), "\n") + "\n"
}

func fakeRecord(kind string, i int) string {
	return fmt.Sprintf(`{"kind":%q,"owner":"alice","id":"r%d"}`, kind, i)
}

// fakeTransferService serves /v1/export in two parts of two records (the
// second after the cursor "c1") and answers /v1/import with one owner
// written a request, on 127.0.0.1 (the file is two parts: two requests).
func fakeTransferService(t *testing.T) (string, string) {
	t.Helper()
	parts := map[string]string{
		"":   exportPartText(t, "", "c1", fakeRecord(memory.ExportKindMemory, 1), fakeRecord(memory.ExportKindMemory, 2)),
		"c1": exportPartText(t, "c1", "", fakeRecord(memory.ExportKindMemory, 3), fakeRecord(memory.ExportKindHistory, 4)),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/export", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, parts[r.URL.Query().Get("after")])
	})
	mux.HandleFunc("POST /v1/import", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = json.NewEncoder(w).Encode(memory.ImportResult{Owners: 1, Records: map[string]int64{memory.ExportKindMemory: 2},
			Inserted: map[string]int64{memory.ExportKindMemory: 2}, Existing: map[string]int64{}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, parts[""] + parts["c1"]
}

// runOn runs the plugin with stderr a terminal or not (the check injected)
// and stdin in; it returns stdout, stderr and the exit code.
func runOn(t *testing.T, terminal bool, in io.Reader, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	errOut := &fakeTerminal{}
	a := &app{out: &out, errOut: errOut, in: in, terminal: func(w io.Writer) bool {
		_, isFake := w.(*fakeTerminal)
		return terminal && isFake
	}}
	code := a.main(ctx, append(args, "--service-token", "t", "--kubeconfig", "/nonexistent"))
	return out.String(), errOut.String(), code
}

// TestTransferProgressOnATerminal (issue 29, E16): on a terminal, export
// draws a bar and a percentage of the header's counts, import one of the
// bytes read of a file (the count alone from a pipe), each redraw over
// the last, cleared before the summary; on anything else only the summary.
func TestTransferProgressOnATerminal(t *testing.T) {
	url, file := fakeTransferService(t)
	path := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	const clear = "\r\x1b[K"
	exportSummary := "Exported 4 records in 2 part(s): history 1, memory 3.\n"
	importSummary := "Imported 2 owner(s) in 2 request(s): inserted memory 4; already there nothing; 0 vectors embedded.\n"
	size := fmt.Sprintf("%s of %s bytes read", grouped(int64(len(file))), grouped(int64(len(file))))

	t.Run("export on a terminal", func(t *testing.T) {
		out, errOut, code := runOn(t, true, strings.NewReader(""), "export", "rt", "--url", url)
		if code != 0 || out != file {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
		for _, want := range []string{
			"\r[###############...............]  50%  2 of 4 records, 1 part(s)\x1b[K",
			"\r[##############################] 100%  4 of 4 records, 2 part(s)\x1b[K",
			clear + exportSummary,
		} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr lacks %q:\n%q", want, errOut)
			}
		}
		if !strings.HasSuffix(errOut, clear+exportSummary) {
			t.Errorf("the summary does not end stderr after the bar was cleared: %q", errOut)
		}
	})
	t.Run("import of a file on a terminal", func(t *testing.T) {
		out, errOut, code := runOn(t, true, strings.NewReader(""), "import", "rt", "-f", path, "--url", url)
		if code != 0 || out != importSummary {
			t.Fatalf("exit %d, stdout %q", code, out)
		}
		want := "\r[##############################] 100%  " + size + ", 2 owner(s) in 2 request(s)\x1b[K"
		if !strings.Contains(errOut, want) || !strings.HasSuffix(errOut, clear) {
			t.Errorf("stderr %q lacks %q or the clearing at the end", errOut, want)
		}
	})
	t.Run("import from a pipe on a terminal: a count, no percentage", func(t *testing.T) {
		_, errOut, code := runOn(t, true, strings.NewReader(file), "import", "rt", "--url", url)
		want := fmt.Sprintf("\r%s bytes read, 2 owner(s) in 2 request(s)\x1b[K", grouped(int64(len(file))))
		if code != 0 || !strings.Contains(errOut, want) || strings.Contains(errOut, "%") {
			t.Errorf("exit %d, stderr %q, want %q and no percentage", code, errOut, want)
		}
	})
	t.Run("not a terminal: the summary alone", func(t *testing.T) {
		_, errOut, code := runOn(t, false, strings.NewReader(""), "export", "rt", "--url", url)
		if code != 0 || errOut != exportSummary {
			t.Errorf("export: exit %d, stderr %q, want only %q", code, errOut, exportSummary)
		}
		out, errOut, code := runOn(t, false, strings.NewReader(""), "import", "rt", "-f", path, "--url", url)
		if code != 0 || errOut != "" || out != importSummary {
			t.Errorf("import: exit %d, stderr %q, stdout %q", code, errOut, out)
		}
	})
}
