package controller

import (
	"strings"
	"testing"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// TestResolvePolicyReranking: spec.reranking reaches the service config
// with its defaults and without the key reference; no section, no
// reranking; a policy the API server did not check is refused by Validate.
func TestResolvePolicyReranking(t *testing.T) {
	spec := crdDefaults()
	if p, err := ResolvePolicy(&spec); err != nil || p.Reranking != nil {
		t.Fatalf("without spec.reranking: %+v, %v", p.Reranking, err)
	}
	spec.Reranking = &memoryv1alpha1.RerankingSpec{Endpoint: "http://tei:8080/rerank", Model: "bge",
		APIKeySecretRef: &memoryv1alpha1.SecretKeySelector{Name: "k"}}
	p, err := ResolvePolicy(&spec)
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Reranking; r == nil || r.Endpoint != "http://tei:8080/rerank" || r.Model != "bge" || r.TopN != 50 || r.Timeout != "2s" {
		t.Fatalf("resolved reranking %+v", p.Reranking)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("a defaulted reranking section is invalid: %v", err)
	}
	spec.Reranking = &memoryv1alpha1.RerankingSpec{Endpoint: "tei", TopN: 500, Timeout: "5ms"}
	p, _ = ResolvePolicy(&spec)
	err = p.Validate()
	for _, want := range []string{"reranking.endpoint", "reranking.topN: 500 must be within 1..200", "reranking.timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %q", err, want)
		}
	}
}

// TestRerankKeyOnlyInServicePods: the key of a policy's reranker is a
// secretKeyRef of the service container (default key "apiKey"), after
// the runtime's own variables; the maintenance jobs never search and do
// not get it.
func TestRerankKeyOnlyInServicePods(t *testing.T) {
	rt := testRuntime()
	ref := &memoryv1alpha1.SecretKeySelector{Name: "rerank"}
	env := specs.Deployment(rt, "img", "h", specs.RerankKeyEnv(ref)...).Spec.Template.Spec.Containers[0].Env
	last := env[len(env)-1]
	if last.Name != naming.EnvRerankAPIKey || last.Value != "" || last.ValueFrom.SecretKeyRef.Name != "rerank" || last.ValueFrom.SecretKeyRef.Key != "apiKey" {
		t.Fatalf("service env ends with %+v", last)
	}
	if len(specs.RerankKeyEnv(nil)) != 0 {
		t.Fatal("no reference, yet a variable")
	}
	for _, v := range specs.CronJob(testRetentionJob(), rt, "img").Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env {
		if v.Name == naming.EnvRerankAPIKey {
			t.Fatal("the job pods get the reranker's key")
		}
	}
}
