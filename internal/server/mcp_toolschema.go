package server

import (
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
