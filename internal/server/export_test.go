package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// exportTokens: an app token bound to alice, an app token bound to bob,
// an agent token bound to alice.
type exportTokens struct{ aliceApp, bobApp, aliceAgent string }

func startExportServer(t *testing.T) (*testServer, exportTokens) {
	t.Helper()
	tk := exportTokens{newTestToken(t), newTestToken(t), newTestToken(t)}
	tn := newTenant(t)
	s := tn.serve(t, serverSetup{tokens: []string{
		tk.aliceApp + " role=app owner=alice name=alice-app",
		tk.bobApp + " role=app owner=bob name=bob-app",
		tk.aliceAgent + " role=agent owner=alice name=alice-bot",
	}})
	return s, tk
}

// exportLines splits an export body into its objects.
func exportLines(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("export line %s: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestExportRoutes: an owner's export holds that owner only and is for
// app and admin tokens that may act for the owner; the tenant's export is
// for admin tokens not bound to an owner; both end with a complete trailer.
func TestExportRoutes(t *testing.T) {
	s, tk := startExportServer(t)
	for _, o := range []string{"alice", "bob"} {
		s.do(t, req{method: "POST", path: "/v1/owners/" + o + "/memories", body: map[string]any{"content": o + " likes sailing", "category": "preference"}}).want(t, 201)
	}
	own := s.do(t, req{method: "GET", path: "/v1/owners/alice/export", token: tk.aliceApp}).want(t, 200)
	if ct := own.header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type %q", ct)
	}
	lines := exportLines(t, own.body)
	for _, l := range lines[1 : len(lines)-1] {
		if l["kind"] != "checkpoint" && l["owner"] != "alice" {
			t.Errorf("alice's export holds %v", l)
		}
	}
	if last := lines[len(lines)-1]; last["kind"] != "trailer" || last["complete"] != true {
		t.Errorf("last line %v", last)
	}
	for _, c := range []struct {
		name, path, token string
		status            int
	}{
		{"an agent token", "/v1/owners/alice/export", tk.aliceAgent, 403},
		{"another owner's token", "/v1/owners/alice/export", tk.bobApp, 403},
		{"a bound token, tenant", "/v1/export", tk.aliceApp, 403},
		{"a bound token, import", "/v1/import", tk.aliceApp, 403},
	} {
		method := "GET"
		if strings.HasSuffix(c.path, "import") {
			method = "POST"
		}
		if got := s.do(t, req{method: method, path: c.path, token: c.token}); got.status != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, got.status, c.status, got.body)
		}
	}
	all := exportLines(t, s.do(t, req{method: "GET", path: "/v1/export?vectors=true"}).want(t, 200).body)
	owners := map[any]bool{}
	for _, l := range all {
		if l["kind"] == "memory" {
			owners[l["owner"]] = true
			if _, ok := l["embedding"].([]any); !ok {
				t.Errorf("vectors=true, memory without embedding: %v", l)
			}
		}
	}
	if !owners["alice"] || !owners["bob"] {
		t.Errorf("tenant export holds the memories of %v", owners)
	}
	p := s.do(t, req{method: "GET", path: "/v1/export?after=garbage"}).want(t, 422).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Field != "after" {
		t.Errorf("bad cursor: %+v", p)
	}
}

// TestImportRoute: an export imported into another tenant through the
// API; again changes nothing; a bad line is a 422 naming lines[N].field
// with nothing written; a dry run writes nothing.
func TestImportRoute(t *testing.T) {
	a, _ := startExportServer(t)
	for i := range 5 {
		a.do(t, req{method: "POST", path: "/v1/owners/alice/memories", body: map[string]any{"content": fmt.Sprintf("fact number %d about ships", i)}}).want(t, 201)
	}
	a.do(t, req{method: "POST", path: "/v1/owners/bob/memories", body: map[string]any{"content": "bob owns a bicycle"}}).want(t, 201)
	body := a.do(t, req{method: "GET", path: "/v1/export"}).want(t, 200).body
	b, _ := startExportServer(t)
	ndjson := map[string]string{"Content-Type": "application/x-ndjson"}

	// A bad line: nothing of any owner is written.
	bad := strings.Replace(string(body), `"importance" : 5`, `"importance" : 11`, 1)
	line := 1 + strings.Count(bad[:strings.Index(bad, `"importance" : 11`)], "\n")
	p := b.do(t, req{method: "POST", path: "/v1/import", body: bad, header: ndjson}).want(t, 422).problem(t)
	// The changed line is also caught by the trailer's checksum.
	if len(p.Errors) != 2 || p.Errors[0].Field != fmt.Sprintf("lines[%d].importance", line) || !strings.HasSuffix(p.Errors[1].Field, "].sha256") {
		t.Fatalf("bad line %d: %+v", line, p)
	}
	var stats memory.Stats
	b.do(t, req{method: "GET", path: "/v1/stats"}).want(t, 200).decode(t, &stats)
	if stats.Active != 0 {
		t.Fatalf("%d memories written by a refused import", stats.Active)
	}

	var res memory.ImportResult
	b.do(t, req{method: "POST", path: "/v1/import?dryRun=true", body: body, header: ndjson}).want(t, 200).decode(t, &res)
	if !res.DryRun || res.Inserted["memory"] != 6 {
		t.Fatalf("dry run: %+v", res)
	}
	b.do(t, req{method: "GET", path: "/v1/stats"}).want(t, 200).decode(t, &stats)
	if stats.Active != 0 {
		t.Fatalf("%d memories written by a dry run", stats.Active)
	}

	b.do(t, req{method: "POST", path: "/v1/import", body: body, header: ndjson}).want(t, 200).decode(t, &res)
	if res.Inserted["memory"] != 6 || res.Owners != 2 || res.Embedded != 6 {
		t.Fatalf("import: %+v", res)
	}
	b.do(t, req{method: "POST", path: "/v1/import", body: body, header: ndjson}).want(t, 200).decode(t, &res)
	if res.Inserted["memory"] != 0 || res.Existing["memory"] != 6 || res.Inserted["history"] != 0 {
		t.Fatalf("second import: %+v", res)
	}
	got := a.do(t, req{method: "GET", path: "/v1/owners/alice/memories"}).want(t, 200).body
	want := b.do(t, req{method: "GET", path: "/v1/owners/alice/memories"}).want(t, 200).body
	if !bytes.Equal(got, want) {
		t.Errorf("alice's memories differ after the import:\n%s\n%s", got, want)
	}
	if r := b.do(t, req{method: "POST", path: "/v1/import", body: "", header: ndjson}); r.status != http.StatusUnprocessableEntity {
		t.Errorf("empty import: %d %s", r.status, r.body)
	}
}
