package modelapi

import (
	"testing"
	"time"
)

// TestLLMAttemptTimeout: one attempt of the chat client may take the whole
// of llm.timeout (a slow local model answers in one long attempt), 10s
// when absent.
func TestLLMAttemptTimeout(t *testing.T) {
	for timeout, want := range map[string]time.Duration{"": 10 * time.Second, "1s": time.Second, "90s": 90 * time.Second, "5m": 5 * time.Minute} {
		cfg := LLMConfig{Endpoint: "http://llm/v1", Model: "m", Timeout: timeout}
		if got := NewLLM(cfg, "", nil).(*openAIChat).client.timeout; got != want {
			t.Errorf("timeout %q: one attempt is cut at %s, want %s", timeout, got, want)
		}
	}
}
