package modelapi

import "context"

// Embedder turns texts into vectors of a fixed size, L2-normalized or not
// (cosine distance does not care). Implementations: the builtin feature
// hasher and an OpenAI-compatible HTTP client.
type Embedder interface {
	// Embed returns one vector per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Dimensions is the size of every vector.
	Dimensions() int
}

// LLM is an OpenAI-compatible chat model asked for JSON answers; the arbiter
// and fact extraction use it. A nil LLM means none is configured.
type LLM interface {
	// CompleteJSON sends a system and a user message and returns the
	// assistant's answer, which the caller parses as JSON.
	CompleteJSON(ctx context.Context, system, user string) (string, error)
}
