package memory

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// exportSchema compiles docs/export.schema.json (draft 2020-12, formats
// asserted) with the JSON Schema validator the OpenAPI tests already use.
func exportSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("../../docs/export.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("docs/export.schema.json: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("export.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("export.schema.json")
	if err != nil {
		t.Fatalf("compiling docs/export.schema.json: %v", err)
	}
	return sch
}

// TestExportMatchesSchema: every line of a rich export (every record
// kind, vectors, resumed parts with checkpoints, an owner's export) is
// valid against docs/export.schema.json.
func TestExportMatchesSchema(t *testing.T) {
	sch := exportSchema(t)
	f := newFixture(t, withGlobalCategory())
	seedRich(t, f, 60)
	for _, body := range [][]byte{exportAll(t, f, "", true, 25), exportAll(t, f, "", false, 0), exportAll(t, f, "alice", true, 0)} {
		for i, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(line)))
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			if err := sch.Validate(v); err != nil {
				t.Fatalf("line %d is not valid against docs/export.schema.json: %v\n%.400s", i+1, err, line)
			}
		}
	}
}
