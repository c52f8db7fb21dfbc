package controller

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/testenv"
)

// loadSamples decodes the objects a kustomization.yaml of config/samples lists.
func loadSamples(t *testing.T, dir string) []client.Object {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	decode := serializer.NewCodecFactory(NewScheme()).UniversalDeserializer()
	var out []client.Object
	for _, r := range k.Resources {
		data, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			t.Fatal(err)
		}
		obj, _, err := decode.Decode(data, nil, nil)
		if err != nil {
			t.Fatalf("decoding %s: %v", r, err)
		}
		out = append(out, obj.(client.Object))
	}
	return out
}

// scenarioSamples: config/samples (what the demo applies) works as is on the
// built-in defaults; the OpenAI-flavoured and connection samples are valid.
func scenarioSamples(e *operatorEnv, t *testing.T) {
	root := filepath.Join(testenv.RepoRoot(), "config", "samples")
	ns := e.newNamespace(t, "samples")
	for _, obj := range loadSamples(t, root) {
		obj.SetNamespace(ns)
		mustCreate(t, e.c, obj)
		if rt, ok := obj.(*memoryv1alpha1.MemoryRuntime); ok {
			e.track(rt)
		}
	}
	e.waitCondition(t, ns, "support-bot", memoryv1alpha1.ConditionDatabaseReady, true, "")
	e.markAvailable(t, ns, "support-bot")
	e.waitCondition(t, ns, "support-bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	eventually(t, "the sample policy is Valid and the sample RetentionJob Ready", 20*time.Second, func() error {
		var p memoryv1alpha1.MemoryPolicy
		if err := e.get(t, ns, "standard", &p); err != nil || !p.IsValid() || p.Status.BoundRuntimes != 1 {
			return fmt.Errorf("policy %+v, %v", p.Status, err)
		}
		rj := e.retentionJob(t, ns, "nightly")
		if c := rj.GetCondition(memoryv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("RetentionJob %+v", rj.Status)
		}
		return nil
	})

	// Not applied for real: they need a reachable embeddings server / database.
	others := loadSamples(t, filepath.Join(root, "openai"))
	for _, obj := range others {
		obj.SetNamespace(ns)
	}
	conn := loadSamples(t, filepath.Join(root, "connection"))
	// The database servers (cluster-scoped) and a runtime placed by label.
	for _, obj := range loadSamples(t, filepath.Join(root, "databases")) {
		if _, ok := obj.(*memoryv1alpha1.MemoryRuntime); ok {
			obj.SetNamespace(ns)
		}
		conn = append(conn, obj)
	}
	for _, obj := range append(others, conn...) {
		if err := e.c.Create(testContext(t), obj, client.DryRunAll); err != nil {
			t.Errorf("sample %T %s is refused: %v", obj, obj.GetName(), err)
		}
	}
}
