package memory

import (
	"strings"
	"testing"
)

// extractInto runs a session extraction of facts from one user turn an
// app appended as user in session id, and returns the stored memories.
func (f *fixture) extractInto(owner, id string) []Memory {
	f.t.Helper()
	f.newSession(owner, id)
	f.appendAs(owner, id, SourceUser, userTurn("I am allergic to penicillin and I love night trains."))
	res, err := f.store.ExtractSession(ctx(f.t), SessionExtractRequest{Owner: owner, SessionID: id, Source: SourceUser})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []Memory
	for _, fact := range res.Facts {
		if fact.Result == nil {
			f.t.Fatalf("fact %+v not stored", fact)
		}
		out = append(out, fact.Result.Memory)
	}
	return out
}

// factsFoundFrom returns what a search and a context naming session find
// of the owner's night-train fact.
func (f *fixture) factsFoundFrom(owner, session string) (searched, rendered bool) {
	f.t.Helper()
	hits, err := f.store.Search(ctx(f.t), SearchRequest{Owner: owner, Session: session, Query: "night trains", Mode: SearchHybrid})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, h := range hits {
		searched = searched || strings.Contains(h.Memory.Content, "night train")
	}
	c, err := f.store.Context(ctx(f.t), ContextRequest{Owner: owner, Session: session, Query: "travel"})
	if err != nil {
		f.t.Fatal(err)
	}
	return searched, strings.Contains(c.Text, "night train")
}

// TestExtractedFactsBelongToTheOwner: facts extracted from session 1 are
// the owner's (no session scope, sourceSession s1): a search and a context
// naming session 2 find them. With conversation.extractionScope session
// they stay session 1's: found from session 1 only.
func TestExtractedFactsBelongToTheOwner(t *testing.T) {
	chat := newLTMChat(t, sourceFacts)
	f := newFixture(t, withLLM(chat.llm()), withPolicy(protectedHealth))
	for _, m := range f.extractInto("ada", "s1") {
		if m.Session != "" || m.SourceSession != "s1" {
			t.Fatalf("fact %q: session %q, sourceSession %q; want owner scope with provenance s1", m.Content, m.Session, m.SourceSession)
		}
		got, err := f.store.Get(ctx(t), "ada", m.ID)
		if err != nil || got.SourceSession != "s1" {
			t.Fatalf("stored fact %+v, %v: want sourceSession s1", got, err)
		}
	}
	if searched, rendered := f.factsFoundFrom("ada", "s2"); !searched || !rendered {
		t.Fatalf("from session 2: searched %v, rendered %v; want the owner's fact found by both", searched, rendered)
	}

	t.Run("scope session", func(t *testing.T) {
		chat := newLTMChat(t, sourceFacts)
		f := newFixture(t, withLLM(chat.llm()), withPolicy(func(p *Policy) {
			protectedHealth(p)
			p.Conversation.ExtractionScope = ExtractionScopeSession
		}))
		for _, m := range f.extractInto("ada", "s1") {
			if m.Session != "s1" || m.SourceSession != "s1" {
				t.Fatalf("fact %q: session %q, sourceSession %q; want session scope s1", m.Content, m.Session, m.SourceSession)
			}
		}
		if searched, rendered := f.factsFoundFrom("ada", "s2"); searched || rendered {
			t.Fatalf("from session 2: searched %v, rendered %v; want the session's fact hidden", searched, rendered)
		}
		if searched, rendered := f.factsFoundFrom("ada", "s1"); !searched || !rendered {
			t.Fatalf("from session 1: searched %v, rendered %v; want it found", searched, rendered)
		}
	})
}

func TestExtractionScopeValidated(t *testing.T) {
	c := DefaultConversationPolicy()
	if c.ExtractionScope != ExtractionScopeOwner {
		t.Fatalf("default extraction scope %q, want owner", c.ExtractionScope)
	}
	c.ExtractionScope = "tenant"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "conversation.extractionScope") {
		t.Fatalf("Validate of scope tenant: %v", err)
	}
}
