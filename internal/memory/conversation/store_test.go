package conversation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/modelapi"
	"github.com/engram-dev/engram/internal/memory/pg"
	"github.com/engram-dev/engram/internal/memory/policy"
	"github.com/engram-dev/engram/internal/memory/textguard"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// noDocuments pins no profile or constraints version: this package's tests
// run without long-term memory (the façade's tests cover the pinning).
type noDocuments struct{}

func (noDocuments) PinnedVersionsSQL(owner, agent string) string {
	return fmt.Sprintf(`0 * length(%s::text)::bigint, 0 * length(%s::text)::bigint`, owner, agent)
}

// newTestStore provisions a tenant on a fresh database (internal/tenant,
// the code the operator runs) and returns a conversation Store over a
// core.State of its login role: no façade in between.
func newTestStore(t *testing.T) *Store {
	t.Helper()
	ctx := context.Background()
	dbURL := testenv.NewDatabase(t)
	admin := testenv.NewPool(t, dbURL, 2)
	schema := fmt.Sprintf("engram_conv_%d", time.Now().UnixNano()%1e9)
	owner := tenant.Owner{UID: "test-" + schema, Namespace: "test-" + schema, Name: schema}
	emb, err := modelapi.NewBuiltinEmbedder(384)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tenant.Provision(ctx, admin, tenant.Spec{Schema: schema, Dimensions: emb.Dimensions(), Owner: owner})
	if err != nil {
		t.Fatalf("provisioning: %v", err)
	}
	t.Cleanup(func() { _, _ = tenant.Drop(context.Background(), admin, schema, owner) })
	pool, err := pg.NewPool(ctx, testenv.WithUser(dbURL, res.LoginRole, res.Password), 4, pg.SessionSettings{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	red, err := textguard.NewRedactor(true, nil)
	if err != nil {
		t.Fatal(err)
	}
	pol := policy.DefaultPolicy()
	pol.Conversation = pol.Conversation.Resolved()
	pol.Limits = pol.Limits.WithQuotaDefaults()
	st := &core.State{Pool: pool, Schema: schema, Policy: pol, Embedder: emb, LLMTimeout: 2 * time.Second,
		Log: slog.New(slog.DiscardHandler), Redactor: red, MaxBytes: 1 << 20}
	return New(st, noDocuments{})
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
