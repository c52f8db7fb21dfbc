package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

func memPath(owner string, rest ...string) string {
	p := "/v1/owners/" + url.PathEscape(owner)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// TestRoutes walks every route through a real HTTP client against a real
// tenant: success paths first, then each error status a route can give for
// reasons other than bad syntax (which TestBadInput covers).
func TestRoutes(t *testing.T) {
	tn, srv := newServedTenant(t)
	const alice, bob = "alice@example.com", "bob"

	add := func(owner string, body map[string]any) memory.AddResult {
		t.Helper()
		r := srv.do(t, req{method: "POST", path: memPath(owner, "memories"), body: body})
		if r.status != http.StatusCreated && r.status != http.StatusOK {
			t.Fatalf("add %v: %d %s", body, r.status, r.body)
		}
		var res memory.AddResult
		r.decode(t, &res)
		return res
	}

	// Add: 201 with Location for a new memory, 200 "merged" for the same fact again.
	r := srv.do(t, req{method: "POST", path: memPath(alice, "memories"),
		body: map[string]any{"content": "Alice prefers dark roast coffee", "category": "preference", "importance": 7, "agent": "barista"}}).want(t, 201)
	var first memory.AddResult
	r.decode(t, &first)
	if first.Action != memory.ActionAdded || first.Memory.Owner != alice || first.Memory.Importance != 7 {
		t.Fatalf("first add = %+v", first)
	}
	if loc := r.header.Get("Location"); loc != memPath(alice, "memories", first.Memory.ID) {
		t.Errorf("Location = %q", loc)
	}
	r = srv.do(t, req{method: "POST", path: memPath(alice, "memories"),
		body: map[string]any{"content": "Alice prefers dark roast coffee", "category": "preference", "agent": "barista"}}).want(t, 200)
	var again memory.AddResult
	r.decode(t, &again)
	if again.Action == memory.ActionAdded || again.Memory.ID != first.Memory.ID {
		t.Fatalf("the same fact again = %+v, want an action other than added on %s", again, first.Memory.ID)
	}

	second := add(alice, map[string]any{"content": "Alice works on the Kubernetes operator project", "category": "project"})
	third := add(alice, map[string]any{"content": "Alice is allergic to peanuts", "category": "identity", "source": "user"})
	bobs := add(bob, map[string]any{"content": "Bob likes tea"})

	t.Run("get", func(t *testing.T) {
		var m memory.Memory
		srv.do(t, req{method: "GET", path: memPath(alice, "memories", second.Memory.ID)}).want(t, 200).decode(t, &m)
		if m.Content != "Alice works on the Kubernetes operator project" || m.Category != "project" || !m.Active {
			t.Fatalf("get = %+v", m)
		}
	})

	t.Run("list with filters and pages", func(t *testing.T) {
		var page memory.ListPage
		srv.do(t, req{method: "GET", path: memPath(alice, "memories")}).want(t, 200).decode(t, &page)
		if len(page.Items) != 3 {
			t.Fatalf("list = %d items, want 3", len(page.Items))
		}
		srv.do(t, req{method: "GET", path: memPath(alice, "memories") + "?category=project"}).want(t, 200).decode(t, &page)
		if len(page.Items) != 1 || page.Items[0].ID != second.Memory.ID {
			t.Fatalf("category filter = %+v", page.Items)
		}
		srv.do(t, req{method: "GET", path: memPath(alice, "memories") + "?agent=barista"}).want(t, 200).decode(t, &page)
		for _, m := range page.Items {
			if m.Agent != "barista" && m.Agent != "" {
				t.Fatalf("agent filter returned %+v", m)
			}
		}
		// Page through one at a time: every memory exactly once.
		seen := map[string]bool{}
		cursor := ""
		for range 10 {
			var pg memory.ListPage
			srv.do(t, req{method: "GET", path: withCursor(memPath(alice, "memories")+"?limit=1", cursor)}).want(t, 200).decode(t, &pg)
			for _, m := range pg.Items {
				if seen[m.ID] {
					t.Fatalf("memory %s listed twice", m.ID)
				}
				seen[m.ID] = true
			}
			if cursor = pg.NextCursor; cursor == "" {
				break
			}
		}
		if len(seen) != 3 {
			t.Fatalf("paging saw %d memories, want 3", len(seen))
		}
	})

	t.Run("update and history", func(t *testing.T) {
		var m memory.Memory
		srv.do(t, req{method: "PATCH", path: memPath(alice, "memories", second.Memory.ID),
			body: map[string]any{"content": "Alice leads the Kubernetes operator project", "importance": 9}}).want(t, 200).decode(t, &m)
		if m.Content != "Alice leads the Kubernetes operator project" || m.Importance != 9 {
			t.Fatalf("update = %+v", m)
		}
		var h historyResponse
		srv.do(t, req{method: "GET", path: memPath(alice, "memories", second.Memory.ID, "history")}).want(t, 200).decode(t, &h)
		if len(h.Items) < 2 {
			t.Fatalf("history = %+v, want the add and the update", h.Items)
		}
	})

	t.Run("search modes", func(t *testing.T) {
		for _, mode := range []string{"hybrid", "vector", "text"} {
			var res searchResponse
			srv.do(t, req{method: "POST", path: memPath(alice, "search"),
				body: map[string]any{"query": "coffee roast", "mode": mode, "topK": 2}}).want(t, 200).decode(t, &res)
			if len(res.Results) == 0 || res.Results[0].Memory.ID != first.Memory.ID {
				t.Fatalf("%s search = %+v, want the coffee memory first", mode, res.Results)
			}
			for _, h := range res.Results {
				if h.Memory.Owner != alice {
					t.Fatalf("%s search leaked another owner's memory: %+v", mode, h.Memory)
				}
			}
		}
	})

	t.Run("context", func(t *testing.T) {
		var c memory.ContextResult
		srv.do(t, req{method: "POST", path: memPath(alice, "context"), body: map[string]any{"query": "what to drink", "maxTokens": 200}}).want(t, 200).decode(t, &c)
		if !strings.Contains(c.Text, "peanuts") || len(c.IDs) == 0 {
			t.Fatalf("context = %+v, want the pinned identity memory", c)
		}
	})

	t.Run("batch", func(t *testing.T) {
		var res batchResponse
		srv.do(t, req{method: "POST", path: memPath(alice, "memories/batch"), body: map[string]any{"items": []map[string]any{
			{"content": "Alice's cat is called Miso"}, {"content": "Alice runs on Sundays", "category": "preference"},
		}}}).want(t, 200).decode(t, &res)
		if len(res.Results) != 2 || res.Results[0].Action != memory.ActionAdded {
			t.Fatalf("batch = %+v", res)
		}
		// One bad item: 422 naming it, nothing written.
		before := listAll(t, srv, alice)
		p := srv.do(t, req{method: "POST", path: memPath(alice, "memories/batch"), body: map[string]any{"items": []map[string]any{
			{"content": "a valid fact about Alice"}, {"content": ""}, {"content": "x", "importance": 11},
		}}}).want(t, 422).problem(t)
		if !hasField(p, "items[1].content") || !hasField(p, "items[2].importance") {
			t.Fatalf("batch problem = %+v, want items[1].content and items[2].importance", p)
		}
		if after := listAll(t, srv, alice); len(after) != len(before) {
			t.Fatalf("a failed batch wrote: %d memories before, %d after", len(before), len(after))
		}
	})

	t.Run("supersede", func(t *testing.T) {
		a := add(alice, map[string]any{"content": "Alice lives in Lisbon", "category": "contextual"})
		b := add(alice, map[string]any{"content": "Alice moved to Porto in May", "category": "contextual"})
		var m memory.Memory
		srv.do(t, req{method: "POST", path: memPath(alice, "memories", a.Memory.ID, "supersede"), body: map[string]any{"by": b.Memory.ID}}).want(t, 200).decode(t, &m)
		if m.SupersededBy != b.Memory.ID || m.Active {
			t.Fatalf("superseded = %+v", m)
		}
		// The other way round would be a cycle: 409.
		p := srv.do(t, req{method: "POST", path: memPath(alice, "memories", b.Memory.ID, "supersede"), body: map[string]any{"by": a.Memory.ID}}).want(t, 409).problem(t)
		if p.Type != ProblemBase+"conflict" {
			t.Fatalf("cycle problem = %+v", p)
		}
		// Superseded once, never twice: a second replacement would fork the chain.
		c := add(alice, map[string]any{"content": "Alice moved to Braga in June", "category": "contextual"})
		p = srv.do(t, req{method: "POST", path: memPath(alice, "memories", a.Memory.ID, "supersede"), body: map[string]any{"by": c.Memory.ID}}).want(t, 409).problem(t)
		if p.Type != ProblemBase+"conflict" || !strings.Contains(p.Detail, "already superseded by "+b.Memory.ID) {
			t.Fatalf("second supersede problem = %+v", p)
		}
		// Superseding by itself: invalid.
		p = srv.do(t, req{method: "POST", path: memPath(alice, "memories", b.Memory.ID, "supersede"), body: map[string]any{"by": b.Memory.ID}}).want(t, 422).problem(t)
		if !hasField(p, "by") {
			t.Fatalf("self-supersede problem = %+v", p)
		}
	})

	t.Run("another owner's memory answers like a missing one", func(t *testing.T) {
		// The same status, type, title and detail: a caller cannot tell
		// whether an id exists under another owner.
		missing := "0b6c2f1e-8d1a-4c3e-9f57-2a9d0c4b7e11"
		theirs, absent := memPath(bob, "memories", first.Memory.ID), memPath(bob, "memories", missing)
		patch := map[string]any{"importance": 1}
		for _, pair := range []struct{ theirs, absent req }{
			{req{method: "GET", path: theirs}, req{method: "GET", path: absent}},
			{req{method: "PATCH", path: theirs, body: patch}, req{method: "PATCH", path: absent, body: patch}},
			{req{method: "DELETE", path: theirs}, req{method: "DELETE", path: absent}},
			{req{method: "GET", path: theirs + "/history"}, req{method: "GET", path: absent + "/history"}},
			{req{method: "POST", path: theirs + "/supersede", body: map[string]any{"by": bobs.Memory.ID}},
				req{method: "POST", path: absent + "/supersede", body: map[string]any{"by": bobs.Memory.ID}}},
			// The replacement belongs to another owner, or does not exist.
			{req{method: "POST", path: memPath(alice, "memories", first.Memory.ID, "supersede"), body: map[string]any{"by": bobs.Memory.ID}},
				req{method: "POST", path: memPath(alice, "memories", first.Memory.ID, "supersede"), body: map[string]any{"by": missing}}},
		} {
			a := srv.do(t, pair.theirs).want(t, 404).problem(t)
			b := srv.do(t, pair.absent).want(t, 404).problem(t)
			if a.Type != ProblemBase+"not-found" || a.Type != b.Type || a.Title != b.Title || a.Detail != b.Detail || len(a.Errors)+len(b.Errors) != 0 {
				t.Errorf("%s %s: another owner's id answers %+v, a missing id %+v", pair.theirs.method, pair.theirs.path, a, b)
			}
		}
		// Nothing changed: the memory is still alice's, active, unchanged.
		var m memory.Memory
		srv.do(t, req{method: "GET", path: memPath(alice, "memories", first.Memory.ID)}).want(t, 200).decode(t, &m)
		if !m.Active || m.Importance != first.Memory.Importance {
			t.Fatalf("another owner's request changed the memory: %+v", m)
		}
	})

	t.Run("403 protected category", func(t *testing.T) {
		p := srv.do(t, req{method: "POST", path: memPath(alice, "memories"), body: map[string]any{"content": "Alice is vegan", "category": "identity", "source": "agent"}}).want(t, 403).problem(t)
		if p.Type != ProblemBase+"protected" {
			t.Fatalf("problem %+v, want protected", p)
		}
		srv.do(t, req{method: "PATCH", path: memPath(alice, "memories", third.Memory.ID), body: map[string]any{"content": "Alice is not allergic"}}).want(t, 403)
		srv.do(t, req{method: "DELETE", path: memPath(alice, "memories", third.Memory.ID) + "?source=agent"}).want(t, 403)
		var m memory.Memory
		srv.do(t, req{method: "GET", path: memPath(alice, "memories", third.Memory.ID)}).want(t, 200).decode(t, &m)
		if m.Content != "Alice is allergic to peanuts" || !m.Active {
			t.Fatalf("the protected memory changed: %+v", m)
		}
	})

	t.Run("404", func(t *testing.T) {
		missing := "0b6c2f1e-8d1a-4c3e-9f57-2a9d0c4b7e11"
		for _, rq := range []req{
			{method: "GET", path: memPath(alice, "memories", missing)},
			{method: "PATCH", path: memPath(alice, "memories", missing), body: map[string]any{"importance": 2}},
			{method: "DELETE", path: memPath(alice, "memories", missing)},
			{method: "GET", path: memPath(alice, "memories", missing, "history")},
			{method: "POST", path: memPath(alice, "memories", missing, "supersede"), body: map[string]any{"by": first.Memory.ID}},
		} {
			if p := srv.do(t, rq).want(t, 404).problem(t); p.Type != ProblemBase+"not-found" {
				t.Errorf("%s %s: %+v", rq.method, rq.path, p)
			}
		}
		p := srv.do(t, req{method: "GET", path: "/v1/nothing-here"}).want(t, 404).problem(t)
		if p.Type != ProblemBase+"route-not-found" {
			t.Errorf("unknown route: %+v", p)
		}
	})

	t.Run("405", func(t *testing.T) {
		r := srv.do(t, req{method: "PUT", path: memPath(alice, "memories", first.Memory.ID), body: map[string]any{}}).want(t, 405)
		if p := r.problem(t); p.Type != ProblemBase+"method-not-allowed" {
			t.Errorf("problem %+v", p)
		}
		if allow := r.header.Get("Allow"); allow != "GET, PATCH, DELETE" {
			t.Errorf("Allow = %q", allow)
		}
	})

	t.Run("409 extract without an LLM", func(t *testing.T) {
		p := srv.do(t, req{method: "POST", path: memPath(alice, "extract"), body: map[string]any{
			"messages": []map[string]any{{"role": "user", "content": "I moved to Berlin last week"}},
		}}).want(t, 409).problem(t)
		if p.Type != ProblemBase+"no-llm" {
			t.Fatalf("problem %+v, want no-llm", p)
		}
	})

	t.Run("401", func(t *testing.T) {
		for _, h := range []map[string]string{
			nil,
			{"Authorization": "Bearer wrong-token"},
			{"Authorization": "Basic " + srv.token},
			{"Authorization": "Bearer " + srv.token + "x"},
			{"Authorization": "Bearer"},
		} {
			r := srv.do(t, req{method: "GET", path: memPath(alice, "memories"), noAuth: true, header: h}).want(t, 401)
			if p := r.problem(t); p.Type != ProblemBase+"unauthorized" {
				t.Errorf("%v: %+v", h, p)
			}
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%v: WWW-Authenticate = %q", h, r.header.Get("WWW-Authenticate"))
			}
		}
		srv.do(t, req{method: "POST", path: "/mcp", noAuth: true, body: map[string]any{}}).want(t, 401)
	})

	t.Run("413 and 415", func(t *testing.T) {
		big := `{"content":"` + strings.Repeat("a", 2<<20) + `"}`
		if p := srv.do(t, req{method: "POST", path: memPath(alice, "memories"), body: big}).want(t, 413).problem(t); p.Type != ProblemBase+"payload-too-large" {
			t.Errorf("413: %+v", p)
		}
		if p := srv.do(t, req{method: "POST", path: memPath(alice, "search"), body: `{"query":"x"}`,
			header: map[string]string{"Content-Type": "text/plain"}}).want(t, 415).problem(t); p.Type != ProblemBase+"unsupported-media-type" {
			t.Errorf("415: %+v", p)
		}
	})

	t.Run("delete", func(t *testing.T) {
		srv.do(t, req{method: "DELETE", path: memPath(alice, "memories", second.Memory.ID) + "?source=user"}).want(t, 204)
		var m memory.Memory
		srv.do(t, req{method: "GET", path: memPath(alice, "memories", second.Memory.ID)}).want(t, 200).decode(t, &m)
		if m.Active {
			t.Fatalf("deleted memory still active: %+v", m)
		}
		var page memory.ListPage
		srv.do(t, req{method: "GET", path: memPath(alice, "memories") + "?includeInactive=true&limit=500"}).want(t, 200).decode(t, &page)
		found := false
		for _, it := range page.Items {
			found = found || it.ID == second.Memory.ID
		}
		if !found {
			t.Fatal("includeInactive does not list the deleted memory")
		}
	})

	t.Run("operations endpoints", func(t *testing.T) {
		srv.do(t, req{method: "GET", path: "/healthz", noAuth: true}).want(t, 200)
		var st statusResponse
		srv.do(t, req{method: "GET", path: "/readyz", noAuth: true}).want(t, 200).decode(t, &st)
		if st.Status != "ready" || st.SchemaVersion == 0 || st.SchemaVersion != st.LatestSchemaVersion {
			t.Fatalf("readyz = %+v", st)
		}
		srv.do(t, req{method: "GET", path: "/openapi.json", noAuth: true}).want(t, 200)
		m := srv.scrape(t)
		for _, want := range []string{
			`engram_http_requests_total{code="201",method="POST",route="POST /v1/owners/{owner}/memories"}`,
			`engram_http_request_duration_seconds_bucket{code="200",method="GET",route="GET /v1/owners/{owner}/memories"`,
			`engram_http_requests_total{code="401",method="GET",route="GET /v1/owners/{owner}/memories"}`,
			`engram_memory_add_actions_total{action="added"}`,
			`engram_upstream_request_duration_seconds_count{service="embedding"}`,
			`engram_upstream_errors_total{service="embedding"} 0`,
			`engram_db_pool_max_connections 10`,
			`engram_db_pool_acquires_total`,
			`engram_auth_tokens 1`,
			`go_goroutines`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})

	t.Run("erase owner", func(t *testing.T) {
		var res memory.EraseResult
		srv.do(t, req{method: "DELETE", path: memPath(alice)}).want(t, 200).decode(t, &res)
		if res.Memories < 5 || res.History < 5 {
			t.Fatalf("erase = %+v", res)
		}
		if items := listAll(t, srv, alice); len(items) != 0 {
			t.Fatalf("after erase, %d memories are left", len(items))
		}
		var left int
		if err := tn.admin.QueryRow(testCtx(t), `SELECT count(*) FROM `+tn.schema+`.memory_history WHERE owner_id = $1`, alice).Scan(&left); err != nil || left != 0 {
			t.Fatalf("history rows left after erase: %d (%v)", left, err)
		}
		// Bob is untouched.
		srv.do(t, req{method: "GET", path: memPath(bob, "memories", bobs.Memory.ID)}).want(t, 200)
	})

	t.Run("logs hold no token and no content at info level", func(t *testing.T) {
		logs := infoLogs(t, srv.logs.String())
		for _, secret := range []string{srv.token, "dark roast", "peanuts", "Miso", alice} {
			if strings.Contains(logs, secret) {
				t.Errorf("the server log contains %q", secret)
			}
		}
		if !strings.Contains(logs, `"route":"POST /v1/owners/{owner}/memories"`) {
			t.Errorf("the access log lacks the route pattern:\n%s", logs)
		}
	})
}

// withCursor is path (with its query) asking for the page after cursor,
// the previous page's nextCursor ("" for the first page).
func withCursor(path, cursor string) string {
	if cursor == "" {
		return path
	}
	return path + "&cursor=" + url.QueryEscape(cursor)
}

// listAll lists every memory of owner, inactive ones included.
func listAll(t *testing.T, srv *testServer, owner string) []memory.Memory {
	t.Helper()
	var all []memory.Memory
	cursor := ""
	for range 100 {
		var page memory.ListPage
		srv.do(t, req{method: "GET", path: withCursor(memPath(owner, "memories")+"?includeInactive=true&limit=500", cursor)}).want(t, 200).decode(t, &page)
		all = append(all, page.Items...)
		if cursor = page.NextCursor; cursor == "" {
			return all
		}
	}
	t.Fatal("more than 100 pages")
	return nil
}

// infoLogs returns the log lines at level info and above.
func infoLogs(t *testing.T, all string) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(all, "\n") {
		if line == "" {
			continue
		}
		var rec struct{ Level string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec.Level != "DEBUG" {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func hasField(p Problem, field string) bool {
	for _, f := range p.Errors {
		if f.Field == field {
			return true
		}
	}
	return false
}
