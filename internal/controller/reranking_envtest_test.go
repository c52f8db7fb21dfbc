package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// rerankingKey is the reranker's key in the scenario's Secret: it must
// reach the service pods through a secretKeyRef and nowhere else.
const rerankingKey = "rk-envtest-9c2b41e0"

// scenarioReranking: spec.reranking is checked by the API server with
// messages a person understands and defaulted (topN 50, timeout 2s); a
// runtime whose policy names a missing key Secret is not Ready and says
// which policy and field; once the Secret exists the service pods get the
// key as ENGRAM_RERANK_API_KEY from it (the jobs do not), the ConfigMap
// carries the reranker without the key, and changing the key rolls the
// pods.
func scenarioReranking(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "rerank")
	ctx := testContext(t)
	pol := func(name string, r *memoryv1alpha1.RerankingSpec) *memoryv1alpha1.MemoryPolicy {
		spec := crdDefaults()
		spec.Reranking = r
		return &memoryv1alpha1.MemoryPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	}
	for _, c := range []struct {
		name string
		r    memoryv1alpha1.RerankingSpec
		want string
	}{
		{"endpoint not a URL", memoryv1alpha1.RerankingSpec{Endpoint: "tei-reranker"}, "reranking.endpoint must be an http or https URL"},
		{"endpoint ftp", memoryv1alpha1.RerankingSpec{Endpoint: "ftp://x/rerank"}, "reranking.endpoint must be an http or https URL"},
		{"topN above 200", memoryv1alpha1.RerankingSpec{Endpoint: "http://r/rerank", TopN: 201}, "reranking.topN must be within 1..200"},
		{"topN negative", memoryv1alpha1.RerankingSpec{Endpoint: "http://r/rerank", TopN: -1}, "reranking.topN must be within 1..200"},
		{"timeout below 100ms", memoryv1alpha1.RerankingSpec{Endpoint: "http://r/rerank", Timeout: "50ms"}, "reranking.timeout must be a duration such as 500ms or 2s, between 100ms and 30s"},
		{"timeout above 30s", memoryv1alpha1.RerankingSpec{Endpoint: "http://r/rerank", Timeout: "1m"}, "reranking.timeout must be a duration such as 500ms or 2s, between 100ms and 30s"},
		{"timeout not a duration", memoryv1alpha1.RerankingSpec{Endpoint: "http://r/rerank", Timeout: "soon"}, "reranking.timeout must be a duration such as 500ms or 2s, between 100ms and 30s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := c.r
			err := e.c.Create(ctx, pol("bad", &r), client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a refusal containing %q", err, c.want)
			}
		})
	}

	ranked := pol("ranked", &memoryv1alpha1.RerankingSpec{Endpoint: "http://tei-reranker:8080/rerank", Model: "bge",
		APIKeySecretRef: &memoryv1alpha1.SecretKeySelector{Name: "rerank-key"}})
	mustCreate(t, e.c, ranked)
	var got memoryv1alpha1.MemoryPolicy
	if err := e.get(t, ns, "ranked", &got); err != nil {
		t.Fatal(err)
	}
	if r := got.Spec.Reranking; r.TopN != 50 || r.Timeout != "2s" {
		t.Fatalf("defaults: topN %d timeout %q, want 50 and 2s", r.TopN, r.Timeout)
	}

	e.createRuntime(t, newRuntime(ns, "bot", "ranked"))
	rt := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonSecretNotFound)
	if err := containsAll(rt.GetCondition(memoryv1alpha1.ConditionReady).Message, `MemoryPolicy "ranked" spec.reranking.apiKeySecretRef`, `"rerank-key"`, `"apiKey"`); err != nil {
		t.Error(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rerank-key", Namespace: ns}, Data: map[string][]byte{"apiKey": []byte(rerankingKey)}}
	mustCreate(t, e.c, secret)
	eventually(t, "the service pods get the key from the Secret", 30*time.Second, func() error {
		var d appsv1.Deployment
		if err := e.get(t, ns, "bot", &d); err != nil {
			return err
		}
		for _, v := range d.Spec.Template.Spec.Containers[0].Env {
			if v.Name == naming.EnvRerankAPIKey {
				if v.Value != "" || v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil ||
					v.ValueFrom.SecretKeyRef.Name != "rerank-key" || v.ValueFrom.SecretKeyRef.Key != "apiKey" {
					return fmt.Errorf("%s = %+v, want a secretKeyRef to rerank-key/apiKey", v.Name, v)
				}
				return nil
			}
		}
		return errors.New("no " + naming.EnvRerankAPIKey + " in the service container")
	})
	cfg := e.serviceConfig(t, ns, "bot")
	if r := cfg.Policy.Reranking; r == nil || r.Endpoint != "http://tei-reranker:8080/rerank" || r.TopN != 50 || r.Timeout != "2s" || r.Model != "bge" {
		t.Fatalf("config reranking %+v", cfg.Policy.Reranking)
	}
	var cm corev1.ConfigMap
	if err := e.get(t, ns, "bot-config", &cm); err != nil {
		t.Fatal(err)
	}
	if err := e.get(t, ns, "bot", rt); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(cm.Data[naming.KeyConfig], rerankingKey) || strings.Contains(fmt.Sprintf("%+v", rt.Status), rerankingKey) {
		t.Fatal("the reranker's key is in the ConfigMap or the status")
	}

	// Changing the key rolls the pods: the Secret is watched through the policy.
	before := e.templateHash(t, ns, "bot")
	update(t, e, secret, func(s *corev1.Secret) { s.Data["apiKey"] = []byte(rerankingKey + "-rotated") })
	eventually(t, "a new key rolls the service pods", 30*time.Second, func() error {
		if e.templateHash(t, ns, "bot") == before {
			return errors.New("the pod template hash did not change")
		}
		return nil
	})
}
