package controller

import (
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

type celCase struct {
	name string
	obj  client.Object
	want string // part of the API server's message
}

func validRuntimeSpec() memoryv1alpha1.MemoryRuntimeSpec {
	return memoryv1alpha1.MemoryRuntimeSpec{Database: memoryv1alpha1.DatabaseSpec{ClusterConnection: "main"}}
}

func validRetentionSpec() memoryv1alpha1.RetentionJobSpec {
	return memoryv1alpha1.RetentionJobSpec{
		RuntimeRef: &memoryv1alpha1.LocalObjectReference{Name: "bot"},
		Schedule:   "0 3 * * *",
		Operations: []memoryv1alpha1.Operation{"expire", "purge"},
	}
}

// celCases are invalid objects, each with the message the API server must
// refuse it with.
func celCases(ns string) []celCase {
	m := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	rt := func(name string, mutate func(*memoryv1alpha1.MemoryRuntimeSpec)) client.Object {
		s := validRuntimeSpec()
		mutate(&s)
		return &memoryv1alpha1.MemoryRuntime{ObjectMeta: m(name), Spec: s}
	}
	pol := func(mutate func(*memoryv1alpha1.MemoryPolicySpec)) client.Object {
		s := crdDefaults()
		mutate(&s)
		return &memoryv1alpha1.MemoryPolicy{ObjectMeta: m("p"), Spec: s}
	}
	rj := func(name string, mutate func(*memoryv1alpha1.RetentionJobSpec)) client.Object {
		s := validRetentionSpec()
		mutate(&s)
		return &memoryv1alpha1.RetentionJob{ObjectMeta: m(name), Spec: s}
	}
	return []celCase{
		// MemoryRuntime
		{"both connections", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Database.ConnectionSecretRef = &memoryv1alpha1.SecretKeySelector{Name: "pg"}
		}), "set exactly one of database.connectionSecretRef or database.clusterConnection"},
		{"no connection", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.ClusterConnection = "" }),
			"set exactly one of database.connectionSecretRef or database.clusterConnection"},
		{"schema pg_", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.Schema = "pg_evil" }), "must not start with pg_"},
		{"schema public", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.Schema = "public" }), "not public, information_schema or engram_control"},
		{"schema with the reserved engram_ prefix", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.Schema = "engram_team_a_bot" }), "that prefix is reserved"},
		{"schema over 56 bytes", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.Schema = strings.Repeat("s", 57) }), "may not be more than 56"},
		{"schema upper case", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.Schema = "Tenant" }), "spec.database.schema"},
		{"schema too long", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.Schema = strings.Repeat("s", 64) }), "Too long"},
		{"name too long", rt(strings.Repeat("n", 54), func(*memoryv1alpha1.MemoryRuntimeSpec) {}), "metadata.name must be at most 53 characters"},
		{"name starts with digit", rt("1bot", func(*memoryv1alpha1.MemoryRuntimeSpec) {}), "metadata.name must start with a letter"},
		{"openai without endpoint", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: "openai", Model: "m"}
		}), "embedding.endpoint and embedding.model are required when embedding.provider is openai"},
		{"unknown provider", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Embedding.Provider = "magic" }), `Unsupported value: "magic"`},
		{"embedding endpoint not http", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: "openai", Model: "m", Endpoint: "ftp://x/v1"}
		}), "embedding.endpoint must be an http or https URL"},
		{"dimensions too small", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Embedding.Dimensions = 8 }), "should be greater than or equal to 64"},
		{"llm endpoint not a URL", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.LLM = &memoryv1alpha1.LLMSpec{Endpoint: "not a url", Model: "m"}
		}), "llm.endpoint must be an http or https URL"},
		{"llm timeout in words", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.LLM = &memoryv1alpha1.LLMSpec{Endpoint: "http://llm/v1", Model: "m", Timeout: "soon"}
		}), "llm.timeout must be a duration such as 10s, 90s or 2m, between 1s and 5m"},
		{"llm timeout too short", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.LLM = &memoryv1alpha1.LLMSpec{Endpoint: "http://llm/v1", Model: "m", Timeout: "500ms"}
		}), "llm.timeout must be a duration such as 10s, 90s or 2m, between 1s and 5m"},
		{"llm timeout too long", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.LLM = &memoryv1alpha1.LLMSpec{Endpoint: "http://llm/v1", Model: "m", Timeout: "1h"}
		}), "llm.timeout must be a duration such as 10s, 90s or 2m, between 1s and 5m"},
		{"privileged port", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Service.Port = 80 }), "should be greater than or equal to 1024"},
		{"too many replicas", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Service.Replicas = ptr.To[int32](101) }), "should be less than or equal to 100"},
		{"unknown reclaim policy", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.ReclaimPolicy = "Destroy" }), `Unsupported value: "Destroy"`},
		{"network policy peer without selector", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.NetworkPolicy = &memoryv1alpha1.MemoryRuntimeNetworkPolicy{From: []networkingv1.NetworkPolicyPeer{{}}}
		}), "each service.networkPolicy.from entry must set podSelector, namespaceSelector or ipBlock"},
		{"network policy ipBlock with selector", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.NetworkPolicy = &memoryv1alpha1.MemoryRuntimeNetworkPolicy{From: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}, PodSelector: &metav1.LabelSelector{}},
			}}
		}), "a service.networkPolicy.from entry with ipBlock cannot also set podSelector or namespaceSelector"},
		{"network policy ipBlock not a CIDR", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.NetworkPolicy = &memoryv1alpha1.MemoryRuntimeNetworkPolicy{From: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "everyone"}},
			}}
		}), "service.networkPolicy.from[].ipBlock.cidr must be a CIDR such as 10.0.0.0/8"},
		// MemoryPolicy
		{"arbitration above auto-merge", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Dedup.ArbitrationThreshold = 0.97 }),
			"thresholds must satisfy 0 < arbitrationThreshold <= autoMergeThreshold <= 1"},
		{"auto-merge above 1", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Dedup.AutoMergeThreshold = 1.5 }),
			"thresholds must satisfy 0 < arbitrationThreshold <= autoMergeThreshold <= 1"},
		{"weight above 1", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Search.VectorWeight = ptr.To(1.5) }), "should be less than or equal to 1"},
		{"all weights 0", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Search.VectorWeight, s.Search.TextWeight, s.Search.DecayWeight = ptr.To(0.0), ptr.To(0.0), ptr.To(0.0)
		}), "at least one of search.vectorWeight, textWeight, decayWeight must be above 0"},
		{"ttl with words", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "a", TTL: "30 days"}}
		}), "must be a whole number and one unit (s, m, h, d or w), such as 30d or 12h, or 0 for never"},
		{"halfLife in years", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "a", HalfLife: "1y"}}
		}), "must be a whole number and one unit"},
		{"purge after in minutes with a fraction", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Retention.PurgeInactiveAfter = "1.5h" }),
			"must be a whole number and one unit"},
		{"duplicate category", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "a"}, {Name: "a"}}
		}), "Duplicate value"},
		{"category name upper case", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "Identity"}}
		}), "spec.categories[0].name"},
		{"defaultTopK above maxTopK", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Search.DefaultTopK = 200 }),
			"search.defaultTopK must not exceed limits.maxTopK"},
		{"unknown injection guard", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Redaction.InjectionGuard = "Maybe" }), `Unsupported value: "Maybe"`},
		{"owner size above the maximum", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Limits.MaxMemoriesPerOwner = 2001 }),
			"should be less than or equal to 2000"},
		{"category priority too high", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "a", Priority: ptr.To[int32](1001)}}
		}), "should be less than or equal to 1000"},
		// RetentionJob
		{"schedule in words", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Schedule = "every night" }), "schedule must be 5 cron fields"},
		{"schedule with seconds", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Schedule = "0 0 3 * * *" }), "schedule must be 5 cron fields"},
		{"time zone in schedule", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Schedule = "CRON_TZ=UTC 0 3 * * *" }),
			"put the time zone in timeZone, not in schedule"},
		{"bad time zone", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.TimeZone = ptr.To("not a zone!") }),
			"timeZone must be an IANA time zone name such as UTC or Europe/Berlin"},
		{"ref and selector", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) {
			s.RuntimeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}), "set exactly one of runtimeRef or runtimeSelector"},
		{"no target", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.RuntimeRef = nil }), "set exactly one of runtimeRef or runtimeSelector"},
		{"no operations", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Operations = []memoryv1alpha1.Operation{} }), "should have at least 1 items"},
		{"repeated operation", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) {
			s.Operations = []memoryv1alpha1.Operation{"purge", "purge"}
		}), "Duplicate value"},
		{"unknown operation", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Operations = []memoryv1alpha1.Operation{"vacuum"} }),
			`Unsupported value: "vacuum"`},
		{"unknown concurrency policy", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.ConcurrencyPolicy = "Sometimes" }),
			`Unsupported value: "Sometimes"`},
		{"negative history", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.FailedJobsHistoryLimit = ptr.To[int32](-1) }),
			"should be greater than or equal to 0"},
		{"retention job name too long", rj(strings.Repeat("j", 41), func(*memoryv1alpha1.RetentionJobSpec) {}),
			"metadata.name must be at most 40 characters"},
	}
}

// testCEL: the API server itself refuses invalid objects, with a message a
// human understands (server-side dry run: nothing is stored).
func (e *operatorEnv) testCEL(t *testing.T) {
	ns := e.newNamespace(t, "cel")
	ctx := testContext(t)

	// The unmodified objects are valid, so each case fails for its own reason.
	for _, obj := range []client.Object{
		&memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: ns}, Spec: validRuntimeSpec()},
		&memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: ns}, Spec: func() memoryv1alpha1.MemoryRuntimeSpec {
			s := validRuntimeSpec()
			s.LLM = &memoryv1alpha1.LLMSpec{Endpoint: "http://llm/v1", Model: "m", Timeout: "1m30s"}
			return s
		}()},
		&memoryv1alpha1.MemoryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, Spec: crdDefaults()},
		&memoryv1alpha1.RetentionJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: ns}, Spec: validRetentionSpec()},
	} {
		if err := e.c.Create(ctx, obj, client.DryRunAll); err != nil {
			t.Fatalf("the valid base %T was refused: %v", obj, err)
		}
	}

	cases := celCases(ns)
	if len(cases) < 25 {
		t.Fatalf("only %d CEL cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := e.c.Create(ctx, c.obj, client.DryRunAll)
			if err == nil {
				t.Fatalf("the API server accepted it; want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("refused with %q\nwant a message containing %q", err, c.want)
			}
		})
	}

	// Immutable fields: an update is refused (the runtime is real here; its
	// connection does not exist, so the operator never touches a database).
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "immutable", Namespace: ns},
		Spec: memoryv1alpha1.MemoryRuntimeSpec{Database: memoryv1alpha1.DatabaseSpec{ClusterConnection: "nowhere", Schema: "cel_immutable"}}}
	mustCreate(t, e.c, rt)
	e.waitCondition(t, ns, rt.Name, memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonConnectionSecretNotFound)
	for _, u := range []struct {
		name   string
		mutate func(*memoryv1alpha1.MemoryRuntime)
		want   string
	}{
		{"schema", func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Database.Schema = "cel_other" }, "database.schema cannot be changed after creation"},
		{"schema removed", func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Database.Schema = "" }, "database.schema cannot be changed after creation"},
		{"dimensions", func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Embedding.Dimensions = 768 }, "embedding.dimensions cannot be changed after creation"},
	} {
		t.Run("update "+u.name, func(t *testing.T) {
			var cur memoryv1alpha1.MemoryRuntime
			if err := e.get(t, ns, rt.Name, &cur); err != nil {
				t.Fatal(err)
			}
			u.mutate(&cur)
			err := e.c.Update(ctx, &cur, client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), u.want) {
				t.Fatalf("update refused with %v, want %q", err, u.want)
			}
		})
	}
	// Other fields stay editable.
	var cur memoryv1alpha1.MemoryRuntime
	if err := e.get(t, ns, rt.Name, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Service.Replicas = ptr.To[int32](3)
	if err := e.c.Update(ctx, &cur, client.DryRunAll); err != nil {
		t.Fatalf("changing replicas was refused: %v", err)
	}
	if err := e.c.Delete(ctx, rt); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the runtime is deleted (finalizer removed)", 30*time.Second, func() error {
		if err := e.get(t, ns, rt.Name, &cur); err == nil {
			return errString("still there, finalizers " + strings.Join(cur.Finalizers, ","))
		}
		return nil
	})
}

type errString string

func (e errString) Error() string { return string(e) }
