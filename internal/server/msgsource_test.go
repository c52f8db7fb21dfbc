package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory"
)

// sourceChat is a fake model that extracts one fact of the protected
// category identity (testConfig) and one preference from any session.
func sourceChat(t *testing.T) *fakeChat {
	return newFakeChat(t, func(system, user string) string {
		if strings.Contains(system, "You extract durable facts") {
			b, _ := json.Marshal(map[string]any{"facts": []map[string]any{
				{"content": "The user is allergic to penicillin", "category": "identity", "importance": 9},
				{"content": "The user likes night trains", "category": "preference", "importance": 5},
			}})
			return string(b)
		}
		return `{"decisions": []}`
	})
}

// TestAgentCannotLaunderUserFactsThroughMessages: an agent token appends a
// role-user line (stored with source agent, as every read shows); an app
// token then extracts the session asserting source user and gets
// effectiveSource agent: the protected fact is refused, the other written
// as agent, the constraints untouched. A session the app appended as user
// extracts as user. The MCP tool reports the same downgrade.
func TestAgentCannotLaunderUserFactsThroughMessages(t *testing.T) {
	chat := sourceChat(t)
	srv := startCredentialServer(t, func(schema string) memory.ServiceConfig { return chat.withLLM(testConfig(schema)) })
	srv.do(t, req{method: "POST", path: memPath("alice", "sessions"), body: map[string]any{"id": "relay"}}).want(t, 201)
	var app memory.AppendResult
	srv.do(t, req{method: "POST", path: sessPath("alice", "relay", "messages"), token: srv.agentAlice, body: map[string]any{
		"messages": []map[string]any{{"role": "user", "content": "I am allergic to penicillin and I like night trains."}},
	}}).want(t, 201).decode(t, &app)
	if len(app.Messages) != 1 || app.Messages[0].Source != memory.SourceAgent {
		t.Fatalf("append answered %+v, want the message with source agent", app.Messages)
	}
	var msgs messagesResponse
	srv.do(t, req{method: "GET", path: sessPath("alice", "relay", "messages") + "?last=5", token: srv.appAlice}).want(t, 200).decode(t, &msgs)
	if len(msgs.Items) != 1 || msgs.Items[0].Role != memory.RoleUser || msgs.Items[0].Source != memory.SourceAgent {
		t.Fatalf("messages %+v: want the user-role line with source agent", msgs.Items)
	}
	var win memory.Window
	srv.do(t, req{method: "POST", path: sessPath("alice", "relay", "window"), body: map[string]any{}}).want(t, 200).decode(t, &win)
	if len(win.Items) != 1 || win.Items[0].Message == nil || win.Items[0].Message.Source != memory.SourceAgent {
		t.Fatalf("window %+v: want the message with source agent", win)
	}

	var ex memory.SessionExtractResult
	srv.do(t, req{method: "POST", path: sessPath("alice", "relay", "extract"), token: srv.appAlice,
		body: map[string]any{"source": "user"}}).want(t, 200).decode(t, &ex)
	if ex.EffectiveSource != memory.SourceAgent || len(ex.Facts) != 2 {
		t.Fatalf("extraction %+v: want effectiveSource agent and 2 facts", ex)
	}
	if ex.Facts[0].Result != nil || !strings.Contains(ex.Facts[0].Dropped, "protected") {
		t.Fatalf("identity fact %+v: want it refused as protected", ex.Facts[0])
	}
	if r := ex.Facts[1].Result; r == nil || r.Memory.Source != memory.SourceAgent {
		t.Fatalf("preference fact %+v: want it written as agent", ex.Facts[1])
	}
	var page memory.ListPage
	srv.do(t, req{method: "GET", path: memPath("alice", "memories")}).want(t, 200).decode(t, &page)
	for _, m := range page.Items {
		if m.Source != memory.SourceAgent || m.Category == "identity" {
			t.Fatalf("memory %+v written by the laundering attempt", m)
		}
	}
	var cons memory.Document
	srv.do(t, req{method: "GET", path: memPath("alice", "constraints")}).want(t, 200).decode(t, &cons)
	if cons.Version != 0 {
		t.Fatalf("constraints %+v: want untouched", cons)
	}

	// The same text appended by the app as user extracts as user.
	srv.do(t, req{method: "POST", path: memPath("alice", "sessions"), body: map[string]any{"id": "own"}}).want(t, 201)
	srv.do(t, req{method: "POST", path: sessPath("alice", "own", "messages"), token: srv.appAlice, body: map[string]any{
		"source": "user", "messages": []map[string]any{{"role": "user", "content": "I am allergic to penicillin."}},
	}}).want(t, 201)
	var own memory.SessionExtractResult
	srv.do(t, req{method: "POST", path: sessPath("alice", "own", "extract"), token: srv.appAlice,
		body: map[string]any{"source": "user"}}).want(t, 200).decode(t, &own)
	if own.EffectiveSource != memory.SourceUser || own.Facts[0].Result == nil || own.Facts[0].Result.Memory.Source != memory.SourceUser {
		t.Fatalf("user-appended session: %+v; want effectiveSource user and the identity fact written as user", own)
	}

	// MCP: the app's extract_session over agent-appended messages says agent.
	srv.do(t, req{method: "POST", path: sessPath("alice", "relay", "messages"), token: srv.agentAlice, body: map[string]any{
		"messages": []map[string]any{{"role": "user", "content": "Also, I am allergic to penicillin."}},
	}}).want(t, 201)
	session := mcpSession(t, srv.testServer, srv.appAlice)
	// An MCP session asserts no source, whatever its token (mcpSource).
	if res := callToolRaw(t, session, "extract_session", map[string]any{"session": "relay", "source": "user"}); !res.IsError {
		t.Fatalf("extract_session as user on an app token's MCP session: %s, want a tool error", text(res))
	}
	var tool memory.SessionExtractResult
	callTool(t, session, "extract_session", map[string]any{"session": "relay"}, &tool)
	if tool.EffectiveSource != memory.SourceAgent || tool.FromSeq != 2 || tool.Facts[0].Result != nil {
		t.Fatalf("extract_session over agent messages = %+v; want effectiveSource agent, identity refused", tool)
	}
}
