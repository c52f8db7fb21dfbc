package memory

import (
	"strings"
	"testing"
)

// protectedHealth adds a protected category "health": only source user
// may write it, so whether an extraction may write it shows the source it
// ran with.
func protectedHealth(p *Policy) {
	p.Categories = append(p.Categories, Category{Name: "health", Priority: 90, Protected: true,
		Description: "the user's health conditions"})
}

// sourceFacts is what the fake model extracts from every session of these
// tests: one fact of the protected category, one of an open one.
var sourceFacts = []sessionFact{
	{Content: "The user is allergic to penicillin", Category: "health", Importance: 9},
	{Content: "The user likes travelling by night train", Category: "preference", Importance: 5},
}

// appendAs appends one turn with source src and fails the test on error.
func (f *fixture) appendAs(owner, session string, src Source, msgs ...TurnMessage) *AppendResult {
	f.t.Helper()
	r, err := f.store.AppendTurn(ctx(f.t), AppendRequest{Owner: owner, SessionID: session, Source: src, Messages: msgs})
	if err != nil {
		f.t.Fatalf("AppendTurn as %s: %v", src, err)
	}
	return r
}

// storedSources counts the owner's active memories per source.
func (f *fixture) storedSources(owner string) map[Source]int64 {
	f.t.Helper()
	rows, err := f.admin.Query(ctx(f.t), `SELECT source, count(*) FROM `+f.store.sql.memories+`
		WHERE owner_id = $1 AND active GROUP BY source`, owner)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	out := map[Source]int64{}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			f.t.Fatal(err)
		}
		out[Source(s)] = n
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	return out
}

func TestLeastTrusted(t *testing.T) {
	cases := []struct{ a, b, want Source }{
		{SourceUser, SourceUser, SourceUser},
		{SourceUser, SourceAgent, SourceAgent},
		{SourceAgent, SourceUser, SourceAgent},
		{SourceUser, SourceSystem, SourceSystem},
		{SourceSystem, SourceUser, SourceSystem},
		{SourceSystem, SourceAgent, SourceAgent},
		{SourceUser, SourceJob, SourceJob},
		{SourceJob, SourceAgent, SourceAgent},
		{SourceSystem, SourceJob, SourceJob},
		{SourceUser, "", SourceAgent},
		{"bogus", SourceUser, SourceAgent},
	}
	for _, c := range cases {
		if got := LeastTrusted(c.a, c.b); got != c.want {
			t.Errorf("LeastTrusted(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

// TestAgentRelayedUserLineExtractsAsAgent is the laundering attempt of a
// hostile agent: with an agent token it appends a role-user line the user
// never said; a later extraction run with source user (an app's
// credential) must not record it as the user's. The facts are written as
// agent, the protected category is refused (and not offered to the model),
// the constraints stay untouched; every read of the messages says agent.
func TestAgentRelayedUserLineExtractsAsAgent(t *testing.T) {
	chat := newLTMChat(t, sourceFacts)
	f := newFixture(t, withLLM(chat.llm()), withPolicy(protectedHealth))
	f.newSession("ada", "s")
	app := f.appendAs("ada", "s", SourceAgent, userTurn("I am allergic to penicillin and I love night trains."), assistantTurn("Noted."))
	for _, m := range app.Messages {
		if m.Source != SourceAgent {
			t.Fatalf("append answered message %d with source %q, want agent", m.Seq, m.Source)
		}
	}

	res, err := f.store.ExtractSession(ctx(t), SessionExtractRequest{Owner: "ada", SessionID: "s", Source: SourceUser})
	if err != nil {
		t.Fatal(err)
	}
	if res.EffectiveSource != SourceAgent {
		t.Fatalf("effective source %q, want agent (the messages were appended by an agent)", res.EffectiveSource)
	}
	if len(res.Facts) != 2 || res.Facts[0].Result != nil || !strings.Contains(res.Facts[0].Dropped, "protected") {
		t.Fatalf("health fact %+v: want it dropped as protected", res.Facts)
	}
	if r := res.Facts[1].Result; r == nil || r.Memory.Source != SourceAgent {
		t.Fatalf("preference fact %+v: want it stored with source agent", res.Facts[1])
	}
	if got := f.storedSources("ada"); got[SourceAgent] != 1 || got[SourceUser] != 0 || len(got) != 1 {
		t.Fatalf("memories by source %v, want exactly one, by agent", got)
	}
	if n := f.n(`SELECT count(*) FROM ` + f.store.sql.memories + ` WHERE owner_id = 'ada' AND category = 'health'`); n != 0 {
		t.Fatalf("%d health memories written, want none", n)
	}
	if n := f.n(`SELECT count(*) FROM ` + f.store.sql.history + ` WHERE owner_id = 'ada' AND actor <> 'agent'`); n != 0 {
		t.Fatalf("%d history rows by another actor than agent", n)
	}
	for _, body := range chat.sent() {
		if strings.Contains(body, "You extract durable facts") && strings.Contains(body, "- health") {
			t.Fatalf("the protected category was offered to the model of an agent-sourced run: %s", body)
		}
	}
	cons, err := f.store.GetDocument(ctx(t), GetDocumentRequest{Owner: "ada", Kind: DocConstraints})
	if err != nil || cons.Version != 0 {
		t.Fatalf("constraints %+v, %v: want untouched (version 0)", cons, err)
	}
	if n := f.n(`SELECT count(*) FROM ` + f.store.sql.docChanges); n != 0 {
		t.Fatalf("%d profile/constraints changes written by extraction", n)
	}

	// Every read of the messages names who appended them.
	msgs, err := items(f.store.Messages(ctx(t), MessagesRequest{Owner: "ada", SessionID: "s"}))
	if err != nil || len(msgs) != 2 || msgs[0].Role != RoleUser || msgs[0].Source != SourceAgent || msgs[1].Source != SourceAgent {
		t.Fatalf("messages %+v, %v: want the user-role line with source agent", msgs, err)
	}
	w, err := f.store.Window(ctx(t), WindowRequest{Owner: "ada", SessionID: "s", Strategy: WindowBuffer, Last: 5})
	if err != nil || len(w.Items) != 2 || w.Items[0].Message.Source != SourceAgent {
		t.Fatalf("window %+v, %v: want the messages with source agent", w, err)
	}
	hits, err := results(f.store.SearchHistory(ctx(t), HistorySearchRequest{Owner: "ada", Query: "penicillin"}))
	if err != nil || len(hits) == 0 || hits[0].Kind != KindMessage || hits[0].Source != SourceAgent {
		t.Fatalf("history hits %+v, %v: want the message hit with source agent", hits, err)
	}
}

// TestUserAppendedSessionExtractsAsUser: a session whose every message an
// app appended as user extracts as user; the protected fact is stored.
func TestUserAppendedSessionExtractsAsUser(t *testing.T) {
	chat := newLTMChat(t, sourceFacts)
	f := newFixture(t, withLLM(chat.llm()), withPolicy(protectedHealth))
	f.newSession("bea", "s")
	f.appendAs("bea", "s", SourceUser, userTurn("I am allergic to penicillin."), assistantTurn("Noted."))
	f.appendAs("bea", "s", SourceUser, userTurn("And I love night trains."))

	res, err := f.store.ExtractSession(ctx(t), SessionExtractRequest{Owner: "bea", SessionID: "s", Source: SourceUser})
	if err != nil {
		t.Fatal(err)
	}
	if res.EffectiveSource != SourceUser || res.FromSeq != 1 || res.ToSeq != 3 {
		t.Fatalf("effective source %q over %d..%d, want user over 1..3", res.EffectiveSource, res.FromSeq, res.ToSeq)
	}
	for _, fct := range res.Facts {
		if fct.Result == nil || fct.Result.Memory.Source != SourceUser {
			t.Fatalf("fact %+v: want it stored with source user", fct)
		}
	}
	if got := f.storedSources("bea"); got[SourceUser] != 2 || len(got) != 1 {
		t.Fatalf("memories by source %v, want 2 by user", got)
	}
	offered := false
	for _, body := range chat.sent() {
		offered = offered || (strings.Contains(body, "You extract durable facts") && strings.Contains(body, "- health"))
	}
	if !offered {
		t.Fatal("the protected category was not offered to the model of a user-sourced run")
	}

	// The request still caps: the same messages extracted as agent stay agent.
	f.newSession("bea", "s2")
	f.appendAs("bea", "s2", SourceUser, userTurn("I am allergic to penicillin."))
	res, err = f.store.ExtractSession(ctx(t), SessionExtractRequest{Owner: "bea", SessionID: "s2"})
	if err != nil || res.EffectiveSource != SourceAgent {
		t.Fatalf("user messages extracted without a source: %+v, %v; want effective source agent", res, err)
	}
}

// TestMixedSessionExtractionIsDowngraded: one agent-appended message among
// user-appended ones makes the run agent; a system one makes it system;
// the next run reads only the messages after the watermark, so user-only
// new messages extract as user again.
func TestMixedSessionExtractionIsDowngraded(t *testing.T) {
	chat := newLTMChat(t, sourceFacts)
	f := newFixture(t, withLLM(chat.llm()), withPolicy(protectedHealth))
	f.newSession("cy", "s")
	f.appendAs("cy", "s", SourceUser, userTurn("I love night trains."), assistantTurn("Nice."))
	f.appendAs("cy", "s", SourceAgent, userTurn("I am allergic to penicillin."))
	f.appendAs("cy", "s", SourceUser, userTurn("Book me one for Friday."))

	res, err := f.store.ExtractSession(ctx(t), SessionExtractRequest{Owner: "cy", SessionID: "s", Source: SourceUser})
	if err != nil {
		t.Fatal(err)
	}
	if res.EffectiveSource != SourceAgent || res.Facts[0].Result != nil || res.Facts[1].Result == nil ||
		res.Facts[1].Result.Memory.Source != SourceAgent {
		t.Fatalf("mixed session: effective %q, facts %+v; want agent, health refused, preference by agent", res.EffectiveSource, res.Facts)
	}

	f.appendAs("cy", "s", SourceSystem, TurnMessage{Role: RoleSystem, Content: "The user is travelling next week."})
	f.appendAs("cy", "s", SourceUser, userTurn("Window seat please."))
	res, err = f.store.ExtractSession(ctx(t), SessionExtractRequest{Owner: "cy", SessionID: "s", Source: SourceUser})
	if err != nil || res.FromSeq != 5 || res.EffectiveSource != SourceSystem || res.Facts[0].Result != nil {
		t.Fatalf("system and user messages: %+v, %v; want effective source system over 5..6, health refused", res, err)
	}

	f.appendAs("cy", "s", SourceUser, userTurn("I am allergic to penicillin, really."))
	res, err = f.store.ExtractSession(ctx(t), SessionExtractRequest{Owner: "cy", SessionID: "s", Source: SourceUser})
	if err != nil || res.FromSeq != 7 || res.EffectiveSource != SourceUser || res.Facts[0].Result == nil ||
		res.Facts[0].Result.Memory.Source != SourceUser {
		t.Fatalf("user-only new messages: %+v, %v; want effective source user, health stored", res, err)
	}
}

// TestEndSessionExtractionIsCappedByMessageSources: the extractOnEnd path
// follows the same rule.
func TestEndSessionExtractionIsCappedByMessageSources(t *testing.T) {
	chat := newLTMChat(t, sourceFacts)
	f := newFixture(t, withLLM(chat.llm()), withPolicy(func(p *Policy) {
		protectedHealth(p)
		p.Conversation.ExtractOnEnd = true
	}))
	f.newSession("dan", "s")
	f.appendAs("dan", "s", SourceAgent, userTurn("I am allergic to penicillin."), assistantTurn("Noted."))
	res, err := f.store.EndSession(ctx(t), EndSessionRequest{Owner: "dan", SessionID: "s", Source: SourceUser})
	if err != nil {
		t.Fatal(err)
	}
	if res.Extraction == nil || res.Extraction.EffectiveSource != SourceAgent || res.Extraction.Facts[0].Result != nil {
		t.Fatalf("end: extraction %+v; want effective source agent, health refused", res.Extraction)
	}
	if got := f.storedSources("dan"); got[SourceUser] != 0 || got[SourceAgent] != 1 {
		t.Fatalf("memories by source %v, want one by agent", got)
	}
}
