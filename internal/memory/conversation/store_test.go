package conversation

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/core/coretest"
	"github.com/engram-dev/engram/internal/memory/policy"
)

// noDocuments pins no profile or constraints version: this package's tests
// run without long-term memory (the façade's tests cover the pinning).
type noDocuments struct{}

func (noDocuments) PinnedVersionsSQL(owner, agent string) string {
	return fmt.Sprintf(`0 * length(%s::text)::bigint, 0 * length(%s::text)::bigint`, owner, agent)
}

// newTestStore is a conversation Store over a provisioned tenant's state
// (coretest.NewState): no façade in between.
func newTestStore(t *testing.T) *Store {
	t.Helper()
	return New(coretest.NewState(t), noDocuments{})
}

// TestConversationStoreStandsOnCore: conversation memory runs over the
// engine's core state alone, without the façade: a session is created,
// a turn appended, a window built, the session compacted, and the owner's
// conversations erased, counted.
func TestConversationStoreStandsOnCore(t *testing.T) {
	s := newTestStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := s.CreateSession(ctx, CreateSessionRequest{Owner: "ann", ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	var turn []TurnMessage
	for i := range 40 {
		turn = append(turn, TurnMessage{Role: RoleUser, Content: fmt.Sprintf("question %d about the trip to Lisbon", i)},
			TurnMessage{Role: RoleAssistant, Content: fmt.Sprintf("answer %d: take the train", i)})
	}
	for i := 0; i < len(turn); i += 20 {
		if _, err := s.AppendTurn(ctx, AppendRequest{Owner: "ann", SessionID: "s1", Messages: turn[i : i+20]}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := s.Window(ctx, WindowRequest{Owner: "ann", SessionID: "s1", Strategy: policy.WindowBuffer, Last: 10})
	if err != nil || len(w.Items) == 0 {
		t.Fatalf("window: %+v, %v", w, err)
	}
	c, err := s.CompactSession(ctx, CompactSessionRequest{Owner: "ann", SessionID: "s1", Force: true})
	if err != nil || c.LeavesCreated == 0 || c.Method != MethodExtractive {
		t.Fatalf("compaction without an LLM: %+v, %v; want extractive leaves", c, err)
	}
	erased, err := func() (Erased, error) {
		var out Erased
		err := s.core.InTx(ctx, func(tx pgx.Tx) error {
			var err error
			out, err = s.EraseOwner(ctx, tx, "ann")
			return err
		})
		return out, err
	}()
	if err != nil || erased.Sessions != 1 || erased.Messages != int64(len(turn)) || erased.Summaries != int64(c.LeavesCreated+c.CondensedCreated) {
		t.Fatalf("erased %+v, %v; want 1 session, %d messages, %d summaries", erased, err, len(turn), c.LeavesCreated+c.CondensedCreated)
	}
	if _, err := s.GetSession(ctx, "ann", "s1"); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("session after the erase: %v, want ErrNotFound", err)
	}
}
