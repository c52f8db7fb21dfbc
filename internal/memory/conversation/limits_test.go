package conversation

import (
	"errors"
	"testing"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/policy"
)

// TestTurnLimitCountsEachTurnOfAnAppend: an append may close the open turn
// and start others; each is checked on its own, the first one over the
// limit is named.
func TestTurnLimitCountsEachTurnOfAnAppend(t *testing.T) {
	s := &Store{core: &core.State{Policy: policy.DefaultPolicy()}}
	s.core.Policy.Conversation.Limits.MaxTurnMessages, s.core.Policy.Conversation.Limits.MaxTurnTokens = 4, 1000
	msgs := func(roles string) []preparedMessage {
		out := make([]preparedMessage, len(roles))
		for i, r := range roles {
			role := map[rune]Role{'u': RoleUser, 'a': RoleAssistant, 't': RoleTool, 's': RoleSystem}[r]
			out[i] = preparedMessage{msg: TurnMessage{Role: role}, tokens: 1}
		}
		return out
	}
	for _, tc := range []struct {
		open      int64
		roles     string
		current   int64 // -1: accepted
		requested int64
	}{
		{open: 3, roles: "a", current: -1},
		{open: 4, roles: "a", current: 4, requested: 1},
		{open: 4, roles: "uaaa", current: -1},                 // closes the full turn, a new one of 4
		{open: 2, roles: "aauaaaa", current: 0, requested: 5}, // the open turn fits, the new one does not
		{open: 2, roles: "aaa", current: 2, requested: 3},
		{open: 0, roles: "saaauaaa", current: -1}, // a system message starts a turn too
		{open: 0, roles: "uatata", current: 0, requested: 6},
	} {
		err := s.checkTurns(turnLength{messages: tc.open, tokens: tc.open}, msgs(tc.roles))
		if tc.current < 0 {
			if err != nil {
				t.Errorf("open %d + %s: %v, want accepted", tc.open, tc.roles, err)
			}
			continue
		}
		var qe *core.QuotaError
		if !errors.As(err, &qe) || qe.Quota != core.QuotaTurnMessages || qe.Current != tc.current || qe.Requested != tc.requested {
			t.Errorf("open %d + %s: %v, want the turn refused with current %d, requested %d", tc.open, tc.roles, err, tc.current, tc.requested)
		}
	}
}
