package modelapi

import "time"

// Option adjusts a client made by NewEmbedder or NewLLM. The defaults suit
// a model server across a network; tests shorten the waits.
type Option func(*openAIClient)

// WithBackoff sets the first retry delay (doubled at each retry).
func WithBackoff(d time.Duration) Option {
	return func(c *openAIClient) { c.backoff = d }
}

// WithAttempts sets how long one attempt may take and how many retries
// follow the first attempt.
func WithAttempts(timeout time.Duration, retries int) Option {
	return func(c *openAIClient) { c.timeout, c.retries = timeout, retries }
}

// WithBatch sets how many texts one embeddings request carries.
func WithBatch(n int) Option {
	return func(c *openAIClient) { c.batch = n }
}
