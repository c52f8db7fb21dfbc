package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of config/samples/kustomization.yaml the demo reads.
type kustomization struct {
	Resources []string `json:"resources"`
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// LoadSamples reads the objects listed by dir/kustomization.yaml.
func LoadSamples(dir string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, fmt.Errorf("reading the samples' kustomization: %w", err)
	}
	var k kustomization
	if err := yaml.Unmarshal(raw, &k); err != nil {
		return nil, fmt.Errorf("parsing %s/kustomization.yaml: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, res := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, res))
		if err != nil {
			return nil, err
		}
		objs, err := decodeManifest(string(b))
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", res, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// decodeManifest splits a YAML manifest into its objects.
func decodeManifest(text string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range docSeparator.Split(text, -1) {
		if len(bytes.TrimSpace([]byte(doc))) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			return nil, err
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
	return out, nil
}

// ApplySamples server-side applies the samples into namespace ns (what
// `kubectl apply --server-side -n ns -k config/samples` does) and returns
// "kind/name" of each.
func ApplySamples(ctx context.Context, c client.Client, dir, ns string) ([]string, error) {
	objs, err := LoadSamples(dir)
	if err != nil {
		return nil, err
	}
	var applied []string
	for _, obj := range objs {
		obj.SetNamespace(ns)
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
			return applied, fmt.Errorf("applying %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		applied = append(applied, fmt.Sprintf("%s/%s", obj.GetKind(), obj.GetName()))
	}
	return applied, nil
}
