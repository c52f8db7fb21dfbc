package policy

import (
	"strings"
	"testing"
	"time"
)

func TestConversationPolicyValidate(t *testing.T) {
	if err := DefaultConversationPolicy().Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	if got := (ConversationPolicy{}).Resolved(); got != DefaultConversationPolicy() {
		t.Errorf("zero policy resolves to %+v, want the defaults", got)
	}
	for _, tc := range []struct {
		want   string
		mutate func(*ConversationPolicy)
	}{
		{"conversation.window.strategy", func(c *ConversationPolicy) { c.Window.Strategy = "all" }},
		{"conversation.window.budget", func(c *ConversationPolicy) { c.Window.Budget = -1 }},
		{"conversation.compaction.threshold", func(c *ConversationPolicy) { c.Compaction.Threshold = 1.5 }},
		{"conversation.compaction.threshold", func(c *ConversationPolicy) { c.Compaction.Threshold = -0.1 }},
		{"conversation.compaction.condenseGroupSize", func(c *ConversationPolicy) { c.Compaction.CondenseGroupSize = 1 }},
		{"conversation.compaction.maxDepth", func(c *ConversationPolicy) { c.Compaction.MaxDepth = 9 }},
		{"conversation.compaction.chunkSize", func(c *ConversationPolicy) { c.Compaction.ChunkSize = 1 }},
		{"conversation.limits.maxMessageBytes", func(c *ConversationPolicy) { c.Limits.MaxMessageBytes = 8 }},
		{"conversation.limits.maxTurnMessages", func(c *ConversationPolicy) { c.Limits.MaxTurnMessages = MaxTurnMessagesCap + 1 }},
		{"conversation.limits.maxTurnMessages: 40 must be at least limits.maxMessagesPerTurn (50)", func(c *ConversationPolicy) { c.Limits.MaxTurnMessages = 40 }},
		{"conversation.limits.maxTurnTokens", func(c *ConversationPolicy) { c.Limits.MaxTurnTokens = 999 }},
		{"conversation.limits.maxMessagesPerSession", func(c *ConversationPolicy) { c.Limits.MaxMessagesPerSession = -5 }},
		{"conversation.archiveAfter", func(c *ConversationPolicy) {
			c.SessionIdleTTL, c.ArchiveAfter = Duration(24*time.Hour), Duration(48*time.Hour)
		}},
	} {
		c := DefaultConversationPolicy()
		tc.mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one naming %s", err, tc.want)
		}
		p := DefaultPolicy()
		p.Conversation = c
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Policy.Validate: %v, want one naming %s", err, tc.want)
		}
	}
}
