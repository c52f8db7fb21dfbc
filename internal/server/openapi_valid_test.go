package server

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

// oasSchemaFile is the official JSON Schema of OpenAPI 3.1 documents
// (testdata/oas/README.md says where it comes from).
var oasSchemaFile = filepath.Join("testdata", "oas", "schema-3.1-2022-10-07.json")

// oasValidator compiles the official OpenAPI 3.1 schema.
func oasValidator(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(oasSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", oasSchemaFile, err)
	}
	c := jsonschema.NewCompiler()
	const url = "https://spec.openapis.org/oas/3.1/schema/2022-10-07"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compiling the OpenAPI schema: %v", err)
	}
	return sch
}

func validateOpenAPI(t *testing.T, sch *jsonschema.Schema, js []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(v)
}

// TestOpenAPIDocumentValid: the published document is valid OpenAPI 3.1
// by the official schema, which rejects unknown properties: a description
// in a YAML flow mapping cut at a comma into a stray key, a misspelt
// keyword, a parameter without "in" all fail here.
func TestOpenAPIDocumentValid(t *testing.T) {
	if err := validateOpenAPI(t, oasValidator(t), OpenAPIJSON); err != nil {
		t.Fatalf("openapi.yaml is not valid OpenAPI 3.1:\n%v", err)
	}
}

// TestOpenAPIDocumentValidCatchesStrayKeys: the check above sees the
// fault that once shipped: an unquoted comma in a flow mapping.
func TestOpenAPIDocumentValidCatchesStrayKeys(t *testing.T) {
	const good = "{name: includeInactive, in: query, schema: {type: boolean}, description: 'Also list deleted, expired ones.'}"
	const bad = "{name: includeInactive, in: query, schema: {type: boolean}, description: Also list deleted, expired ones.}"
	sch := oasValidator(t)
	for _, c := range []struct {
		param string
		valid bool
	}{{good, true}, {bad, false}} {
		doc := strings.Join([]string{
			"openapi: 3.1.0",
			"info: {title: t, version: v1}",
			"paths:",
			"  /x:",
			"    get:",
			"      parameters:",
			"        - " + c.param,
			"      responses: {'200': {description: ok}}",
		}, "\n")
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := validateOpenAPI(t, sch, js); (err == nil) != c.valid {
			t.Errorf("%s: valid = %v, want %v (%v)", c.param, err == nil, c.valid, err)
		}
	}
}
