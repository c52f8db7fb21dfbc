package longterm

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/conversation"
	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/core/coretest"
	"github.com/engram-dev/engram/internal/memory/write"
	"github.com/engram-dev/engram/internal/tenant"
)

// TestLongTermStoreStandsOnCore: documents and episodes run over the
// engine's core state and conversation memory alone, without the façade:
// a session pins the profile version current at its creation (Pins), an
// ended session gets its episode, and the owner's long-term memory is
// erased, counted.
func TestLongTermStoreStandsOnCore(t *testing.T) {
	st := coretest.NewState(t)
	conv := conversation.New(st, Pins(st))
	lt := New(st, conv, write.New(st, tenant.OwnerVectorsMaxDims))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	put := func(content string) {
		t.Helper()
		if _, err := lt.PutDocument(ctx, PutDocumentRequest{Owner: "ann", Agent: "a1", Kind: DocProfile, Content: content, Source: core.SourceUser}); err != nil {
			t.Fatal(err)
		}
	}
	put("likes trains")
	if _, err := conv.CreateSession(ctx, conversation.CreateSessionRequest{Owner: "ann", ID: "s1", Agent: "a1"}); err != nil {
		t.Fatal(err)
	}
	put("likes trains and boats")
	if snap, err := lt.GetSnapshot(ctx, "ann", "s1"); err != nil || snap.ProfileVersion != 1 {
		t.Fatalf("snapshot %+v, %v; want the session pinned at profile version 1", snap, err)
	}
	if snap, err := lt.AdvanceSnapshot(ctx, "ann", "s1"); err != nil || snap.ProfileVersion != 2 {
		t.Fatalf("advanced snapshot %+v, %v; want profile version 2", snap, err)
	}
	for i := range MinEpisodeUserTurns {
		if _, err := conv.AppendTurn(ctx, conversation.AppendRequest{Owner: "ann", SessionID: "s1", Messages: []conversation.TurnMessage{
			{Role: conversation.RoleUser, Content: fmt.Sprintf("question %d about the ferry to Porto", i)},
			{Role: conversation.RoleAssistant, Content: "it leaves at nine"}}}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := lt.SettleEpisode(ctx, "ann", "s1", true)
	if err != nil || out.Episode == nil || !out.Session.Archived || out.Episode.UserTurns != MinEpisodeUserTurns {
		t.Fatalf("ending the session: %+v, %v; want it archived with an episode of %d user turns", out, err, MinEpisodeUserTurns)
	}
	found, err := lt.SearchEpisodes(ctx, EpisodeSearchRequest{Owner: "ann", Query: "ferry to Porto"})
	if err != nil || len(found.Results) != 1 || found.Results[0].Episode.ID != out.Episode.ID {
		t.Fatalf("episode search: %+v, %v; want the session's episode", found, err)
	}
	var erased Erased
	err = st.InTx(ctx, func(tx pgx.Tx) error {
		var err error
		erased, err = lt.EraseOwner(ctx, tx, "ann")
		return err
	})
	if err != nil || erased != (Erased{Episodes: 1, Documents: 1, Changelog: 2}) {
		t.Fatalf("erased %+v, %v; want 1 episode, 1 document, 2 changes", erased, err)
	}
}
