package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// quotaConfig is testConfig with small quotas.
func quotaConfig(schema string) memory.ServiceConfig {
	cfg := testConfig(schema)
	cfg.Policy.Limits.MaxSessionsPerOwner = 2
	cfg.Policy.Limits.MaxEpisodesPerOwner = 1
	cfg.Policy.Conversation.Limits.MaxTurnMessages = 60
	cfg.Policy.Conversation.Limits.MaxMessagesPerSession = 70
	return cfg
}

// wantQuotaProblem fails unless r is the problem typ naming quota with
// these counts, its detail naming the quota too.
func wantQuotaProblem(t *testing.T, r *response, status int, typ, quota string, limit, current, requested int64) {
	t.Helper()
	p := r.want(t, status).problem(t)
	if p.Type != ProblemBase+typ || p.QuotaMembers == nil {
		t.Fatalf("problem %+v, want type %s with quota members", p, typ)
	}
	if m := *p.QuotaMembers; m != (QuotaMembers{Quota: quota, Limit: limit, Current: current, Requested: requested}) {
		t.Fatalf("quota members %+v, want %s limit %d current %d requested %d", m, quota, limit, current, requested)
	}
	if !strings.Contains(p.Detail, quota) {
		t.Fatalf("detail %q does not name %s", p.Detail, quota)
	}
}

// messages is a turn body: a user message (when user) and n assistant messages.
func messages(user bool, n int) map[string]any {
	var ms []map[string]any
	if user {
		ms = append(ms, map[string]any{"role": "user", "content": "A question"})
	}
	for i := range n {
		ms = append(ms, map[string]any{"role": "assistant", "content": fmt.Sprintf("Answer part %d", i)})
	}
	return map[string]any{"messages": ms}
}

// TestQuotaProblems: over a quota the API answers problem+json with a
// stable type and the members quota, limit, current and requested: 409
// quota-exceeded for sessions per owner, messages per session and episodes
// per owner; 422 turn-too-long for a turn that would pass its length.
// Nothing of a refused request is stored; an /end refused by the episode
// quota leaves the session open.
func TestQuotaProblems(t *testing.T) {
	srv := startCredentialServer(t, quotaConfig)
	for _, id := range []string{"s1", "s2"} {
		srv.do(t, req{method: "POST", path: memPath("alice", "sessions"), body: map[string]any{"id": id}}).want(t, http.StatusCreated)
	}
	wantQuotaProblem(t, srv.do(t, req{method: "POST", path: memPath("alice", "sessions"), body: map[string]any{"id": "s3"}}),
		http.StatusConflict, "quota-exceeded", memory.QuotaSessionsPerOwner, 2, 2, 1)

	appendTo := func(id string, body map[string]any) *response {
		return srv.do(t, req{method: "POST", path: sessPath("alice", id, "messages"), body: body})
	}
	appendTo("s1", messages(true, 49)).want(t, http.StatusCreated)
	wantQuotaProblem(t, appendTo("s1", messages(false, 11)), http.StatusUnprocessableEntity, "turn-too-long",
		memory.QuotaTurnMessages, 60, 50, 11)
	appendTo("s1", messages(false, 10)).want(t, http.StatusCreated)
	wantQuotaProblem(t, appendTo("s1", messages(true, 10)), http.StatusConflict, "quota-exceeded",
		memory.QuotaMessagesPerSession, 70, 60, 11)
	if got := readAll(t, srv.testServer, "alice", "s1"); len(got) != 60 {
		t.Fatalf("%d messages stored, want 60: refused appends store nothing", len(got))
	}

	for _, id := range []string{"e1", "e2"} {
		srv.do(t, req{method: "POST", path: memPath("bob", "sessions"), body: map[string]any{"id": id}}).want(t, http.StatusCreated)
		for range 3 {
			srv.do(t, req{method: "POST", path: sessPath("bob", id, "messages"), body: messages(true, 1)}).want(t, http.StatusCreated)
		}
	}
	srv.do(t, req{method: "POST", path: sessPath("bob", "e1", "end")}).want(t, http.StatusOK)
	wantQuotaProblem(t, srv.do(t, req{method: "POST", path: sessPath("bob", "e2", "end")}), http.StatusConflict, "quota-exceeded",
		memory.QuotaEpisodesPerOwner, 1, 1, 1)
	var e2 memory.Session
	srv.do(t, req{method: "GET", path: sessPath("bob", "e2")}).want(t, http.StatusOK).decode(t, &e2)
	if e2.Archived {
		t.Fatal("an /end refused by the episode quota archived the session")
	}
}

// TestMCPQuotaErrors: through MCP, append_turn over a turn's length, and
// its creation of a session for an owner at the session quota, are tool
// errors naming the quota and the counts.
func TestMCPQuotaErrors(t *testing.T) {
	srv := startCredentialServer(t, quotaConfig)
	session := mcpSession(t, srv.testServer, srv.agentAlice)
	turn := func(user bool, n int) []map[string]any {
		return messages(user, n)["messages"].([]map[string]any)
	}
	callTool(t, session, "append_turn", map[string]any{"session": "m1", "messages": turn(true, 49)}, nil)
	res := callToolRaw(t, session, "append_turn", map[string]any{"session": "m1", "messages": turn(false, 11)})
	if msg := text(res); !res.IsError || !strings.Contains(msg, memory.QuotaTurnMessages) || !strings.Contains(msg, "the turn has 50 messages") {
		t.Fatalf("append_turn over the turn's length: %s, want a tool error naming %s and the count", msg, memory.QuotaTurnMessages)
	}
	callTool(t, session, "append_turn", map[string]any{"session": "m2", "messages": turn(true, 0)}, nil)
	res = callToolRaw(t, session, "append_turn", map[string]any{"session": "m3", "messages": turn(true, 0)})
	if msg := text(res); !res.IsError || !strings.Contains(msg, memory.QuotaSessionsPerOwner) || !strings.Contains(msg, "the owner has 2 sessions") {
		t.Fatalf("append_turn creating a third session: %s, want a tool error naming %s and the count", msg, memory.QuotaSessionsPerOwner)
	}
}
