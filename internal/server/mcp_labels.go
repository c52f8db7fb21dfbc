package server

import (
	"encoding/json"

	"github.com/engram-dev/engram/internal/memory"
)

// mcpMetadata is the metadata argument of a tool as the JSON the memory
// engine checks (nil when absent). The SDK decoded it into a map already,
// so it re-encodes: the engine's limits apply to what is stored.
func mcpMetadata(m map[string]any) (json.RawMessage, error) {
	if m == nil {
		return nil, nil
	}
	js, err := json.Marshal(m)
	if err != nil {
		return nil, &memory.ValidationError{Fields: []memory.FieldError{{Field: "metadata", Message: "must be a JSON object"}}}
	}
	return js, nil
}
