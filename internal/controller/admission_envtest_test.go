package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// HIGH 5 of issue 26's fourteenth review: a RetentionJob (or any Engram
// kind) with 12,000 labels was cached whole. The shipped admission policy
// (config/admission, copied into the chart) refuses, on a real
// kube-apiserver, an Engram object with more than 64 labels or more than
// 16 KiB of labels and memory.engram.dev/ annotations, with a message that
// says so; others' annotations (kubectl's copy of the object) still pass.
func TestAdmissionPolicyBoundsEngramObjectsMetadata(t *testing.T) {
	ctx, _, c := ownControlPlane(t, 2*time.Minute, "team-a")
	installPolicy(ctx, t, c, filepath.Join(testenv.RepoRoot(), "config", "admission", "metadata-bounds.yaml"))

	tooMany := map[string]string{}
	for i := range 65 {
		tooMany[fmt.Sprintf("l%d", i)] = "v"
	}
	tooBig := map[string]string{}
	for i := range 60 {
		tooBig[fmt.Sprintf("%s/k%d", strings.Repeat("d", 250), i)] = strings.Repeat("v", 63)
	}
	create := func(name string, labels, annotations map[string]string) error {
		rj := testRetentionJob()
		rj.Name, rj.UID, rj.Labels, rj.Annotations = name, "", labels, annotations
		return c.Create(ctx, rj)
	}
	// The policy takes effect a moment after it is created: wait for the
	// first refusal (bounded by ctx).
	for {
		err := create("many", tooMany, nil)
		if err != nil {
			if !strings.Contains(err.Error(), "at most 64 labels, this one has 65") {
				t.Fatalf("65 labels: %v, want a refusal that says why", err)
			}
			break
		}
		if err := c.Delete(ctx, testRetentionJobNamed("many")); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the policy never refused 65 labels")
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := create("big", tooBig, nil); err == nil || !strings.Contains(err.Error(), "at most 16384 bytes") {
		t.Errorf("60 labels of 16 KiB and more: %v, want a refusal", err)
	}
	ann := map[string]string{naming.AnnotationRunNow: strings.Repeat("r", 17<<10)}
	if err := create("ann", nil, ann); err == nil || !strings.Contains(err.Error(), "at most 16384 bytes") {
		t.Errorf("a memory.engram.dev/ annotation of 17 KiB: %v, want a refusal", err)
	}
	ok := map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 100<<10), naming.AnnotationRunNow: "now"}
	if err := create("fine", map[string]string{"team": "a"}, ok); err != nil {
		t.Errorf("an object within bounds, with 100 KiB of others' annotations: %v", err)
	}
}

func testRetentionJobNamed(name string) client.Object {
	rj := testRetentionJob()
	rj.Name, rj.UID = name, ""
	return rj
}

// installPolicy creates every object of the YAML file at path.
func installPolicy(ctx context.Context, t *testing.T, c client.Client, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("decoding %s: %v", path, err)
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}
