package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// toolSchemaOptions infer the tools' output schemas from their Go types as
// the SDK would, except for json.RawMessage: a memory's metadata is kept
// as the JSON the client sent (numbers exact), and is a JSON object, not
// the byte array its Go type reads as.
var toolSchemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {Types: []string{"null", "object"}},
}}

// outputSchema is the output schema of a tool whose result is Out.
func outputSchema[Out any]() *jsonschema.Schema {
	rt := reflect.TypeFor[Out]()
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	s, err := jsonschema.ForType(rt, toolSchemaOptions)
	if err != nil {
		// The types are the program's own: a failure is a programming error.
		panic(fmt.Sprintf("the output schema of %v: %v", rt, err))
	}
	return s
}

// inputSchema is the input schema of a tool taking In, as the SDK would
// infer it, with the filter argument spelt out: its Go type is a map (the
// filter's grammar is recursive, which a schema inferred from Go types
// cannot be), so the grammar of openapi.yaml's Filter goes in, one
// grammar in REST and MCP. The engine still checks every filter and names
// the offending part (bounds, keys, kinds of values).
func inputSchema[In any]() *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("the input schema of %T: %v", *new(In), err))
	}
	if f, ok := s.Properties["filter"]; ok {
		s.Properties["filter"] = &jsonschema.Schema{Ref: "#/$defs/Filter", Description: f.Description}
		s.Defs = filterSchemas()
	}
	return s
}

// filterSchemaNames are the schemas of openapi.yaml a filter is made of.
var filterSchemaNames = []string{"Filter", "FilterCondition", "RangeBound", "TimeRange"}

// filterSchemas are openapi.yaml's filter schemas as JSON Schema $defs
// (OpenAPI 3.1 schemas are JSON Schema; only the references move).
func filterSchemas() map[string]*jsonschema.Schema {
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPIJSON, &doc); err != nil {
		panic("openapi.yaml's schemas: " + err.Error())
	}
	defs := map[string]*jsonschema.Schema{}
	for _, name := range filterSchemaNames {
		js := bytes.ReplaceAll(doc.Components.Schemas[name], []byte("#/components/schemas/"), []byte("#/$defs/"))
		var s jsonschema.Schema
		if err := json.Unmarshal(js, &s); err != nil {
			panic(fmt.Sprintf("openapi.yaml's %s schema: %v", name, err))
		}
		defs[name] = &s
	}
	return defs
}
