package server

import (
	"bytes"
	"context"
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

// mcpOwnerFilter is the owner (mcpOwner) and the filter (mcpFilter) of a
// reading tool's arguments.
func mcpOwnerFilter(ctx context.Context, askedOwner string, filter map[string]any) (string, *memory.Filter, error) {
	owner, err := mcpOwner(ctx, askedOwner)
	if err != nil {
		return "", nil, err
	}
	f, err := mcpFilter(filter)
	if err != nil {
		return "", nil, err
	}
	return owner, f, nil
}

// mcpFilter is the filter argument of a tool as a memory.Filter (nil when
// absent). The argument is an object in the tool's schema (the filter's
// Go type is recursive, which a JSON schema inferred from types cannot
// be); it is decoded strictly here, so a misspelt operator is an error.
func mcpFilter(m map[string]any) (*memory.Filter, error) {
	if m == nil {
		return nil, nil
	}
	js, err := json.Marshal(m)
	var f memory.Filter
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		err = dec.Decode(&f)
	}
	if err != nil {
		return nil, &memory.ValidationError{Fields: []memory.FieldError{{Field: "filter", Message: "must be a filter: " + err.Error()}}}
	}
	return &f, nil
}
