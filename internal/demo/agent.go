package demo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
)

// agentToken mints what an application backend gives its agent for one
// user: a signed token bound to alice, role agent, valid 15 minutes, made
// with the runtime's signing key and no Kubernetes round trip (the demo
// reads the key from the Secret; a backend mounts it). Then the agent
// writes a fact (allowed), rewrites a protected one (refused: only the user
// may) and reads bob (refused: another owner).
func (s *Scenario) agentToken(ctx context.Context, r *Report) error {
	admin, err := s.api(ctx, r)
	if err != nil {
		return err
	}
	var secret corev1.Secret
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: naming.APITokenSecretName(r.Runtime)}, &secret); err != nil {
		return fmt.Errorf("reading the API token Secret: %w", err)
	}
	keys, _ := auth.ParseSigningKeys(secret.Data[naming.KeySigningKey])
	if keys.Len() == 0 {
		return errors.New("the API token Secret holds no signing key")
	}
	token, err := auth.MintAgent(keys.MintKey(), "alice", "support-bot/alice", 15*time.Minute, time.Now())
	if err != nil {
		return err
	}
	s.printf("   minted a signed agent token bound to alice (subject support-bot/alice, 15m), like `manager token mint`\n")
	agent := &API{Base: admin.Base, Token: token}

	var res memory.AddResult
	body := map[string]any{"content": "Alice likes window seats on trains", "category": "contextual"}
	if err := agent.Do(ctx, http.MethodPost, "/v1/owners/alice/memories", body, &res); err != nil {
		return fmt.Errorf("the agent's own write: %w", err)
	}
	r.AgentOwnWrite = string(res.Action)
	s.printf("   POST /v1/owners/alice/memories %q -> %s (source %s)\n", body["content"], res.Action, res.Memory.Source)

	protected := map[string]any{"content": "Alice is no longer allergic to peanuts", "category": "identity"}
	r.AgentProtected = refusal(agent.Do(ctx, http.MethodPost, "/v1/owners/alice/memories", protected, nil))
	s.printf("   POST /v1/owners/alice/memories %q (category identity, protected) -> %s\n", protected["content"], describe(r.AgentProtected))
	r.AgentOtherOwner = refusal(agent.Do(ctx, http.MethodGet, "/v1/owners/bob/memories", nil, nil))
	s.printf("   GET /v1/owners/bob/memories -> %s\n", describe(r.AgentOtherOwner))
	if r.AgentProtected == nil || r.AgentOtherOwner == nil {
		return errors.New("the agent token was allowed what it must not do")
	}
	if res.Action != memory.ActionAdded {
		return nil
	}
	// Undo the agent's new memory, so the later steps tell the same story.
	return admin.Do(ctx, http.MethodDelete, "/v1/owners/alice/memories/"+res.Memory.ID, nil, nil)
}

// refusal returns the problem of a refused request, nil when it succeeded
// or failed another way.
func refusal(err error) *StatusError {
	var se *StatusError
	if errors.As(err, &se) {
		return se
	}
	return nil
}

func describe(se *StatusError) string {
	if se == nil {
		return "ALLOWED"
	}
	return fmt.Sprintf("%d %s: %s", se.Status, se.Problem.Title, se.Problem.Detail)
}
