package memory

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// runConcurrently runs fn(0..n-1) on n goroutines released together and
// returns their errors.
func runConcurrently(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			errs[i] = fn(i)
		}()
	}
	start.Done()
	done.Wait()
	return errs
}

// splitQuotaErrors counts nil errors and *QuotaErrors of quota; any other
// error fails the test.
func splitQuotaErrors(t *testing.T, errs []error, quota string, limit int64) (ok, refused int) {
	t.Helper()
	for _, err := range errs {
		var qe *QuotaError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &qe) && qe.Quota == quota && qe.Limit == limit && qe.Current+qe.Requested > limit:
			refused++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	return ok, refused
}

// TestSessionsPerOwnerQuota: an owner at maxSessionsPerOwner cannot create
// another session (a *QuotaError naming the count); another owner can;
// deleting a session makes room again.
func TestSessionsPerOwnerQuota(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Limits.MaxSessionsPerOwner = 3 }))
	for i := range 3 {
		f.newSession("fay", fmt.Sprintf("s%d", i))
	}
	_, err := f.store.CreateSession(ctx(t), CreateSessionRequest{Owner: "fay", ID: "s3"})
	wantQuota(t, err, QuotaSessionsPerOwner, 3, 3, 1)
	if n := f.n(`SELECT count(*) FROM ` + f.store.sql.sessions + ` WHERE owner_id = 'fay'`); n != 3 {
		t.Fatalf("%d sessions stored, want 3", n)
	}
	f.newSession("gus", "s0")
	if err := f.store.DeleteSession(ctx(t), "fay", "s0"); err != nil {
		t.Fatal(err)
	}
	f.newSession("fay", "s3")
}

// TestConcurrentSessionCreationCannotPassTheQuota: 40 creations at once
// for an owner with room for 10 create exactly 10 sessions; the others get
// a *QuotaError. The count and the insert run under the owner's lock.
func TestConcurrentSessionCreationCannotPassTheQuota(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Limits.MaxSessionsPerOwner = 10 }), withMaxConns(16))
	errs := runConcurrently(40, func(i int) error {
		_, err := f.store.CreateSession(ctx(t), CreateSessionRequest{Owner: "hana", ID: fmt.Sprintf("c%d", i)})
		return err
	})
	ok, refused := splitQuotaErrors(t, errs, QuotaSessionsPerOwner, 10)
	n := f.n(`SELECT count(*) FROM ` + f.store.sql.sessions + ` WHERE owner_id = 'hana'`)
	if ok != 10 || refused != 30 || n != 10 {
		t.Fatalf("%d created, %d refused, %d stored; want 10, 30, 10", ok, refused, n)
	}
}

// TestConcurrentAppendsCannotPassMessagesPerSession: 16 appends of 3
// messages at once to a session with room for 20 store 6 of them (18
// messages); the others are refused whole.
func TestConcurrentAppendsCannotPassMessagesPerSession(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Conversation.Limits.MaxMessagesPerSession = 20 }), withMaxConns(16))
	f.newSession("ida", "busy")
	errs := runConcurrently(16, func(i int) error {
		_, err := f.store.AppendTurn(ctx(t), AppendRequest{Owner: "ida", SessionID: "busy",
			Messages: []TurnMessage{userTurn(fmt.Sprintf("question %d", i)), assistantTurn("answer"), assistantTurn("more")}})
		return err
	})
	ok, refused := splitQuotaErrors(t, errs, QuotaMessagesPerSession, 20)
	if ok != 6 || refused != 10 {
		t.Fatalf("%d appends stored, %d refused; want 6 and 10", ok, refused)
	}
	f.wantStored("ida", "busy", 18)
}

// endableSession creates a session with three user turns (an episode's worth).
func (f *fixture) endableSession(owner, id string) {
	f.t.Helper()
	f.newSession(owner, id)
	for i := range 3 {
		f.appendTurn(owner, id, userTurn(fmt.Sprintf("Planning the %s trip, step %d", id, i)), assistantTurn("Noted."))
	}
}

// TestEndOverEpisodeQuotaWritesNothing: with maxEpisodesPerOwner 2 and
// extractOnEnd on, ending a third session that would get an episode is a
// *QuotaError, and nothing is written: no episode, the session neither
// archived nor ended, no LLM call, no memory, the extraction watermark
// unchanged. Ending a session without an episode's worth of turns, or
// ending an ended session again, still works.
func TestEndOverEpisodeQuotaWritesNothing(t *testing.T) {
	chat := newLTMChat(t, []sessionFact{{Content: "The user travels to Lisbon", Category: "project", Importance: 6}})
	f := newFixture(t, withLLM(chat.llm()), withPolicy(func(p *Policy) {
		p.Limits.MaxEpisodesPerOwner = 2
		p.Conversation.ExtractOnEnd = true
	}))
	for _, id := range []string{"one", "two", "three"} {
		f.endableSession("jo", id)
	}
	for _, id := range []string{"one", "two"} {
		if res, err := f.store.EndSession(ctx(t), EndSessionRequest{Owner: "jo", SessionID: id}); err != nil || res.Episode == nil {
			t.Fatalf("ending %s: %+v, %v", id, res, err)
		}
	}
	calls, memories := chat.calls.Load(), f.n(`SELECT count(*) FROM `+f.store.sql.memories)
	_, err := f.store.EndSession(ctx(t), EndSessionRequest{Owner: "jo", SessionID: "three"})
	wantQuota(t, err, QuotaEpisodesPerOwner, 2, 2, 1)
	if got := chat.calls.Load(); got != calls {
		t.Errorf("%d LLM calls for a refused end", got-calls)
	}
	if n := f.n(`SELECT count(*) FROM ` + f.store.sql.memories); n != memories {
		t.Errorf("a refused end wrote %d memories", n-memories)
	}
	if n := f.n(`SELECT count(*) FROM ` + f.store.sql.episodes + ` WHERE session_id = 'three'`); n != 0 {
		t.Errorf("a refused end wrote an episode")
	}
	if n := f.n(`SELECT count(*) FROM ` + f.store.sql.sessions + ` WHERE id = 'three' AND (archived OR ended_at IS NOT NULL OR extracted_through <> 0)`); n != 0 {
		t.Errorf("a refused end archived, ended or extracted the session")
	}
	// Still possible: a session without an episode's worth, an ended one again.
	f.newSession("jo", "short")
	f.appendTurn("jo", "short", userTurn("hi"))
	if res, err := f.store.EndSession(ctx(t), EndSessionRequest{Owner: "jo", SessionID: "short"}); err != nil || res.Episode != nil || !res.Session.Archived {
		t.Fatalf("ending a short session at the quota: %+v, %v", res, err)
	}
	if res, err := f.store.EndSession(ctx(t), EndSessionRequest{Owner: "jo", SessionID: "one"}); err != nil || res.Episode == nil {
		t.Fatalf("ending an ended session again at the quota: %+v, %v", res, err)
	}
}

// TestConcurrentEndsCannotPassTheEpisodeQuota: ten sessions ended at once
// by an owner with room for three episodes: exactly three end (archived,
// with an episode), seven are refused and stay open.
func TestConcurrentEndsCannotPassTheEpisodeQuota(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Limits.MaxEpisodesPerOwner = 3 }), withMaxConns(16))
	for i := range 10 {
		f.endableSession("kim", fmt.Sprintf("e%d", i))
	}
	errs := runConcurrently(10, func(i int) error {
		_, err := f.store.EndSession(ctx(t), EndSessionRequest{Owner: "kim", SessionID: fmt.Sprintf("e%d", i)})
		return err
	})
	ok, refused := splitQuotaErrors(t, errs, QuotaEpisodesPerOwner, 3)
	episodes := f.n(`SELECT count(*) FROM ` + f.store.sql.episodes + ` WHERE owner_id = 'kim'`)
	archived := f.n(`SELECT count(*) FROM ` + f.store.sql.sessions + ` WHERE owner_id = 'kim' AND archived`)
	if ok != 3 || refused != 7 || episodes != 3 || archived != 3 {
		t.Fatalf("%d ended, %d refused, %d episodes, %d archived; want 3, 7, 3, 3", ok, refused, episodes, archived)
	}
}

// TestIdleEpisodesStopAtTheQuota: the sessions job writes no episode past
// maxEpisodesPerOwner; it still deletes the idle sessions and succeeds.
func TestIdleEpisodesStopAtTheQuota(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) {
		p.Limits.MaxEpisodesPerOwner = 1
		p.Conversation.SessionIdleTTL = Duration(3600e9)
	}))
	f.endableSession("lou", "a")
	f.endableSession("lou", "b")
	f.x(`UPDATE ` + f.store.sql.sessions + ` SET last_active_at = now() - interval '2 hours'`)
	if _, err := f.store.RunJob(ctx(t), OpSessions, JobOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := f.n(`SELECT count(*) FROM ` + f.store.sql.episodes); n != 1 {
		t.Fatalf("%d episodes, want 1 (the quota)", n)
	}
	if n := f.n(`SELECT count(*) FROM ` + f.store.sql.sessions); n != 0 {
		t.Fatalf("%d sessions left, want the idle ones deleted", n)
	}
}

// TestIdleEpisodesOfOwnersAtTheQuotaDoNotStarveOthers: an owner at its
// episode quota with more idle sessions than one run of the sessions job
// handles (200) does not take the run's slots from another owner, whose
// idle session still gets its episode.
func TestIdleEpisodesOfOwnersAtTheQuotaDoNotStarveOthers(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) {
		p.Limits.MaxEpisodesPerOwner = 1
		p.Conversation.ArchiveAfter = Duration(3600e9)
	}))
	f.endableSession("nat", "ended")
	if res, err := f.store.EndSession(ctx(t), EndSessionRequest{Owner: "nat", SessionID: "ended"}); err != nil || res.Episode == nil {
		t.Fatalf("ending nat's first session: %+v, %v", res, err)
	}
	// 201 older idle sessions of nat, three user messages each.
	f.x(`INSERT INTO ` + f.store.sql.sessions + ` (owner_id, id, message_count, next_seq, token_count, last_active_at)
		SELECT 'nat', 'idle-' || i, 3, 4, 3, now() - interval '3 hours' FROM generate_series(1, 201) AS i`)
	f.x(`INSERT INTO ` + f.store.sql.messages + ` (owner_id, session_id, seq, role, content, tokens)
		SELECT 'nat', 'idle-' || i, s, 'user', 'question ' || s, 1 FROM generate_series(1, 201) AS i, generate_series(1, 3) AS s`)
	f.endableSession("oli", "mine")
	f.x(`UPDATE ` + f.store.sql.sessions + ` SET last_active_at = now() - interval '2 hours' WHERE owner_id = 'oli'`)
	if _, err := f.store.RunJob(ctx(t), OpSessions, JobOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := f.n(`SELECT count(*) FROM ` + f.store.sql.episodes + ` WHERE owner_id = 'oli'`); n != 1 {
		t.Fatalf("oli has %d episodes after the job, want 1", n)
	}
	if n := f.n(`SELECT count(*) FROM ` + f.store.sql.episodes + ` WHERE owner_id = 'nat'`); n != 1 {
		t.Fatalf("nat has %d episodes, want 1 (the quota)", n)
	}
}

// versions lists the changelog's versions of kind, newest first.
func (f *fixture) versions(owner string, kind DocumentKind) []int64 {
	f.t.Helper()
	log, err := f.store.Changelog(ctx(f.t), ChangelogRequest{Owner: owner, Scope: kind})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []int64
	for _, e := range log {
		out = append(out, e.Version)
	}
	return out
}

// TestDocumentVersionsKept: with maxDocumentVersions 3 a write keeps the
// newest three versions and prunes older ones in its transaction, except a
// version a session's snapshot pins (its context still renders it) until
// that session is gone; a pruned version is not found.
func TestDocumentVersionsKept(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) { p.Limits.MaxDocumentVersions = 3 }))
	put := func(kind DocumentKind, content string) {
		t.Helper()
		if _, err := f.store.PutDocument(ctx(t), PutDocumentRequest{Owner: "max", Kind: kind, Content: content, Source: SourceUser}); err != nil {
			t.Fatal(err)
		}
	}
	put(DocProfile, "Max likes version 1.")
	put(DocProfile, "Max likes version 2.")
	f.newSession("max", "pinned") // pins profile version 2
	for v := 3; v <= 10; v++ {
		put(DocProfile, fmt.Sprintf("Max likes version %d.", v))
	}
	if got := f.versions("max", DocProfile); !slices.Equal(got, []int64{10, 9, 8, 2}) {
		t.Fatalf("changelog versions %v, want [10 9 8 2]: the newest three and the pinned one", got)
	}
	if _, err := f.store.GetDocument(ctx(t), GetDocumentRequest{Owner: "max", Kind: DocProfile, Version: 5}); !isNotFound(err) {
		t.Fatalf("pruned version 5: err = %v, want ErrNotFound", err)
	}
	c, err := f.store.Context(ctx(t), ContextRequest{Owner: "max", Session: "pinned", MaxTokens: 500})
	if err != nil || !strings.Contains(c.Text, "version 2.") || c.ProfileVersion != 2 {
		t.Fatalf("context of the pinned session: %+v, %v; want profile version 2", c, err)
	}
	if err := f.store.DeleteSession(ctx(t), "max", "pinned"); err != nil {
		t.Fatal(err)
	}
	put(DocProfile, "Max likes version 11.")
	if got := f.versions("max", DocProfile); !slices.Equal(got, []int64{11, 10, 9}) {
		t.Fatalf("changelog versions %v after the pin went, want [11 10 9]", got)
	}
	for v := 1; v <= 5; v++ {
		put(DocConstraints, fmt.Sprintf("Rule %d.", v))
	}
	if got := f.versions("max", DocConstraints); !slices.Equal(got, []int64{5, 4, 3}) {
		t.Fatalf("constraints versions %v, want [5 4 3]", got)
	}
	d, err := f.store.GetDocument(ctx(t), GetDocumentRequest{Owner: "max", Kind: DocProfile})
	if err != nil || d.Version != 11 || d.Content != "Max likes version 11." {
		t.Fatalf("current profile %+v, %v", d, err)
	}
}
