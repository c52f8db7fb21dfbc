package controller

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/memory"
)

// TestOperationsMirrorTheEngine pins the maintenance operations of the API
// (CanonicalOperations, the +kubebuilder Enum marker and the CRD generated
// from it) to the engine's (memory.RunOperations): the same names in the same
// order. memory cannot import api/, so the two lists are kept apart; a new
// operation is one line in each list and a word in the marker.
func TestOperationsMirrorTheEngine(t *testing.T) {
	var api []string
	for _, op := range memoryv1alpha1.CanonicalOperations {
		api = append(api, string(op))
	}
	if len(api) == 0 || !slices.Equal(api, memory.RunOperations) {
		t.Fatalf("api/v1alpha1.CanonicalOperations = %v, internal/memory.RunOperations = %v: they must be equal, in order", api, memory.RunOperations)
	}

	src, err := os.ReadFile("../../api/v1alpha1/retentionjob_types.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^// \+kubebuilder:validation:Enum=(.*)\ntype Operation string$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("no +kubebuilder:validation:Enum marker right above `type Operation string`")
	}
	if marker := strings.Split(string(m[1]), ";"); !slices.Equal(marker, api) {
		t.Errorf("the Enum marker lists %v, CanonicalOperations %v", marker, api)
	}

	raw, err := os.ReadFile("../../config/crd/bases/memory.engram.dev_retentionjobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	var generated []string
	for _, v := range crd.Spec.Versions {
		for _, e := range v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["operations"].Items.Schema.Enum {
			generated = append(generated, strings.Trim(string(e.Raw), `"`))
		}
	}
	if !slices.Equal(generated, api) {
		t.Errorf("the generated CRD enumerates %v, CanonicalOperations %v: run make manifests", generated, api)
	}
}
