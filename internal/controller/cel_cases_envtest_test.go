package controller

// The invalid objects of scenarioCEL (cel_envtest_test.go), each with the
// message the API server refuses it with, and the valid bases they mutate.

import (
	"fmt"
	"strings"

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

// validExportS3 is a valid S3 destination of an export.
func validExportS3() *memoryv1alpha1.ExportSpec {
	return &memoryv1alpha1.ExportSpec{S3: &memoryv1alpha1.ExportS3{Endpoint: "https://s3.eu-west-1.amazonaws.com", Bucket: "engram-backups",
		CredentialsSecretRef: memoryv1alpha1.S3CredentialsSecretRef{Name: "s3-backup"}}}
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
	// exportRJ is a retention job exporting to validExportS3, mutated.
	exportRJ := func(mutate func(*memoryv1alpha1.ExportSpec)) client.Object {
		return rj("j", func(s *memoryv1alpha1.RetentionJobSpec) {
			s.Operations = append(s.Operations, memoryv1alpha1.OperationExport)
			s.Export = validExportS3()
			mutate(s.Export)
		})
	}
	return []celCase{
		// MemoryRuntime
		{"both connections", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Database.ConnectionSecretRef = &memoryv1alpha1.SecretKeySelector{Name: "pg"}
		}), "spec.database: Invalid value: set exactly one of database.connectionSecretRef, database.clusterConnection, database.databaseRef or database.databaseSelector"},
		{"no connection", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.ClusterConnection = "" }),
			"spec.database: Invalid value: set exactly one of database.connectionSecretRef, database.clusterConnection, database.databaseRef or database.databaseSelector"},
		{"schema pg_", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.Schema = "pg_evil" }), `spec.database.schema: Invalid value: "pg_evil": database.schema must not start with pg_ (reserved by PostgreSQL)`},
		{"schema public", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.Schema = "public" }), `spec.database.schema: Invalid value: "public": database.schema must name a schema of its own, not public, information_schema or engram_control (the operator's bookkeeping)`},
		{"schema upper case", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.Schema = "Tenant" }), `spec.database.schema: Invalid value: "Tenant": spec.database.schema in body should match '^[a-z_][a-z0-9_]*$'`},
		{"name too long", rt(strings.Repeat("n", 54), func(*memoryv1alpha1.MemoryRuntimeSpec) {}), "metadata.name must be at most 53 characters so that derived names (<name>-api-token) fit"},
		{"name starts with digit", rt("1bot", func(*memoryv1alpha1.MemoryRuntimeSpec) {}), "metadata.name must be a DNS label: lower-case letters, digits and -, starting with a letter (it also names the Service)"},
		{"schema with the reserved engram_ prefix", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.Schema = "engram_team_a_bot" }), `spec.database.schema: Invalid value: "engram_team_a_bot": database.schema must not start with engram_: that prefix is reserved for the names Engram derives from namespace and name (leave database.schema out to get one)`},
		{"schema over 56 bytes", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.Schema = strings.Repeat("s", 57) }), "spec.database.schema: Too long: may not be more than 56 bytes"},
		{"openai without endpoint", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: "openai", Model: "m"}
		}), "spec.embedding: Invalid value: embedding.endpoint and embedding.model are required when embedding.provider is openai"},
		{"unknown provider", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Embedding.Provider = "magic" }), `spec.embedding.provider: Unsupported value: "magic": supported values: "builtin", "openai"`},
		{"embedding endpoint not http", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: "openai", Model: "m", Endpoint: "ftp://x/v1"}
		}), `spec.embedding.endpoint: Invalid value: "ftp://x/v1": embedding.endpoint must be an http or https URL`},
		{"dimensions too small", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Embedding.Dimensions = 8 }), "spec.embedding.dimensions: Invalid value: 8: spec.embedding.dimensions in body should be greater than or equal to 64"},
		{"llm endpoint not a URL", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.LLM = &memoryv1alpha1.LLMSpec{Endpoint: "not a url", Model: "m"}
		}), `spec.llm.endpoint: Invalid value: "not a url": llm.endpoint must be an http or https URL`},
		{"privileged port", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Service.Port = 80 }), "spec.service.port: Invalid value: 80: spec.service.port in body should be greater than or equal to 1024"},
		{"too many replicas", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Service.Replicas = ptr.To[int32](101) }), "spec.service.replicas: Invalid value: 101: spec.service.replicas in body should be less than or equal to 100"},
		{"response byte cap too small", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.Limits = &memoryv1alpha1.ServiceLimits{MaxResponseBytes: 1024}
		}), "spec.service.limits.maxResponseBytes: Invalid value"},
		{"response byte cap too large", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.Limits = &memoryv1alpha1.ServiceLimits{MaxResponseBytes: 1 << 30}
		}), "service.limits.maxResponseBytes must be between 65536 (64 KiB) and 67108864 (64 MiB)"},
		{"requests in flight per credential above the service's", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.Limits = &memoryv1alpha1.ServiceLimits{MaxInflightPerCredential: 65}
		}), "service.limits.maxInflightPerCredential must be between 1 and 64, the requests a replica serves at once"},
		{"requests in flight per credential negative", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.Limits = &memoryv1alpha1.ServiceLimits{MaxInflightPerCredential: -1}
		}), "service.limits.maxInflightPerCredential must be between 1 and 64"},
		{"unknown reclaim policy", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.ReclaimPolicy = "Destroy" }), `spec.reclaimPolicy: Unsupported value: "Destroy": supported values: "Retain", "Delete"`},
		{"cluster connection with capitals", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.ClusterConnection = "Main_DB" }),
			`spec.database.clusterConnection: Invalid value: "Main_DB": spec.database.clusterConnection in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'`},
		{"cluster connection too long", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.ClusterConnection = strings.Repeat("c", 64) }),
			"spec.database.clusterConnection: Too long: may not be more than 63 bytes"},
		{"schema information_schema", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.Schema = "information_schema" }),
			`spec.database.schema: Invalid value: "information_schema": database.schema must name a schema of its own, not public, information_schema or engram_control (the operator's bookkeeping)`},
		{"schema of the operator", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.Schema = "engram_control" }),
			`spec.database.schema: Invalid value: "engram_control": database.schema must name a schema of its own, not public, information_schema or engram_control (the operator's bookkeeping)`},
		{"secret ref without a name", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Database.ClusterConnection, s.Database.ConnectionSecretRef = "", &memoryv1alpha1.SecretKeySelector{}
		}), `spec.database.connectionSecretRef.name: Invalid value: "": spec.database.connectionSecretRef.name in body should be at least 1 chars long`},
		{"secret key with a slash", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Database.ClusterConnection, s.Database.ConnectionSecretRef = "", &memoryv1alpha1.SecretKeySelector{Name: "pg", Key: "a/b"}
		}), `spec.database.connectionSecretRef.key: Invalid value: "a/b": spec.database.connectionSecretRef.key in body should match '^[-._a-zA-Z0-9]+$'`},
		{"unknown synchronous commit", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.SynchronousCommit = "maybe" }),
			`spec.database.synchronousCommit: Unsupported value: "maybe": supported values: "on", "off"`},
		{"unknown onChange", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Database.OnChange = "Copy" }),
			`spec.database.onChange: Unsupported value: "Copy": supported values: "Refuse", "Move"`},
		{"dimensions too large", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Embedding.Dimensions = 8192 }),
			"spec.embedding.dimensions: Invalid value: 8192: spec.embedding.dimensions in body should be less than or equal to 4096"},
		{"embedding model too long", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Embedding = memoryv1alpha1.EmbeddingSpec{Provider: "openai", Model: strings.Repeat("m", 257), Endpoint: "http://e/v1"}
		}), "spec.embedding.model: Too long: may not be more than 256 bytes"},
		{"llm without an endpoint", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.LLM = &memoryv1alpha1.LLMSpec{Model: "m"} }),
			`spec.llm.endpoint: Invalid value: "": spec.llm.endpoint in body should be at least 1 chars long`},
		{"llm without a model", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.LLM = &memoryv1alpha1.LLMSpec{Endpoint: "http://llm/v1"} }),
			`spec.llm.model: Invalid value: "": spec.llm.model in body should be at least 1 chars long`},
		{"port above 65535", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Service.Port = 70000 }), "spec.service.port: Invalid value: 70000: spec.service.port in body should be less than or equal to 65535"},
		{"negative replicas", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) { s.Service.Replicas = ptr.To[int32](-1) }),
			"spec.service.replicas: Invalid value: -1: spec.service.replicas in body should be greater than or equal to 0"},
		{"name with a dot", rt("bot.v2", func(*memoryv1alpha1.MemoryRuntimeSpec) {}), "metadata.name must be a DNS label: lower-case letters, digits and -, starting with a letter (it also names the Service)"},
		{"llm timeout in words", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.LLM = &memoryv1alpha1.LLMSpec{Endpoint: "http://llm/v1", Model: "m", Timeout: "soon"}
		}), `spec.llm.timeout: Invalid value: "soon": llm.timeout must be a duration such as 10s, 90s or 2m, between 1s and 5m`},
		{"llm timeout too short", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.LLM = &memoryv1alpha1.LLMSpec{Endpoint: "http://llm/v1", Model: "m", Timeout: "500ms"}
		}), `spec.llm.timeout: Invalid value: "500ms": llm.timeout must be a duration such as 10s, 90s or 2m, between 1s and 5m`},
		{"llm timeout too long", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.LLM = &memoryv1alpha1.LLMSpec{Endpoint: "http://llm/v1", Model: "m", Timeout: "1h"}
		}), `spec.llm.timeout: Invalid value: "1h": llm.timeout must be a duration such as 10s, 90s or 2m, between 1s and 5m`},
		{"network policy peer without selector", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.NetworkPolicy = &memoryv1alpha1.MemoryRuntimeNetworkPolicy{From: []networkingv1.NetworkPolicyPeer{{}}}
		}), "spec.service.networkPolicy: Invalid value: each service.networkPolicy.from entry must set podSelector, namespaceSelector or ipBlock"},
		{"network policy ipBlock with selector", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.NetworkPolicy = &memoryv1alpha1.MemoryRuntimeNetworkPolicy{From: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}, PodSelector: &metav1.LabelSelector{}},
			}}
		}), "spec.service.networkPolicy: Invalid value: a service.networkPolicy.from entry with ipBlock cannot also set podSelector or namespaceSelector (use two entries)"},
		{"network policy ipBlock not a CIDR", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.NetworkPolicy = &memoryv1alpha1.MemoryRuntimeNetworkPolicy{From: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "everyone"}},
			}}
		}), "spec.service.networkPolicy: Invalid value: service.networkPolicy.from[].ipBlock.cidr must be a CIDR such as 10.0.0.0/8"},
		{"rate limit of 0 a minute", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.Limits = &memoryv1alpha1.ServiceLimits{RateLimit: &memoryv1alpha1.RateLimit{RequestsPerMinute: 0, Burst: 10}}
		}), "spec.service.limits.rateLimit.requestsPerMinute: Invalid value: 0: spec.service.limits.rateLimit.requestsPerMinute in body should be greater than or equal to 1"},
		{"rate limit burst of 0", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.Limits = &memoryv1alpha1.ServiceLimits{LLMRateLimit: &memoryv1alpha1.RateLimit{RequestsPerMinute: 10, Burst: 0}}
		}), "spec.service.limits.llmRateLimit.burst: Invalid value: 0: spec.service.limits.llmRateLimit.burst in body should be greater than or equal to 1"},
		{"LLM rate limit above the request limit", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.Limits = &memoryv1alpha1.ServiceLimits{
				RateLimit:    &memoryv1alpha1.RateLimit{RequestsPerMinute: 100, Burst: 10},
				LLMRateLimit: &memoryv1alpha1.RateLimit{RequestsPerMinute: 200, Burst: 10},
			}
		}), "spec.service.limits: Invalid value: service.limits.llmRateLimit.requestsPerMinute must not exceed service.limits.rateLimit.requestsPerMinute (default 6000): every LLM-backed request also counts against rateLimit"},
		{"LLM rate limit above the default request limit", rt("r", func(s *memoryv1alpha1.MemoryRuntimeSpec) {
			s.Service.Limits = &memoryv1alpha1.ServiceLimits{LLMRateLimit: &memoryv1alpha1.RateLimit{RequestsPerMinute: 6001, Burst: 10}}
		}), "service.limits.llmRateLimit.requestsPerMinute must not exceed service.limits.rateLimit.requestsPerMinute (default 6000)"},
		// MemoryPolicy
		{"arbitration above auto-merge", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Dedup.ArbitrationThreshold = 0.97 }),
			"spec.dedup: Invalid value: thresholds must satisfy 0 < arbitrationThreshold <= autoMergeThreshold <= 1"},
		{"auto-merge above 1", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Dedup.AutoMergeThreshold = 1.5 }),
			"spec.dedup: Invalid value: thresholds must satisfy 0 < arbitrationThreshold <= autoMergeThreshold <= 1"},
		{"weight above 1", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Search.VectorWeight = ptr.To(1.5) }), "spec.search.vectorWeight: Invalid value: 1.5: spec.search.vectorWeight in body should be less than or equal to 1"},
		{"all weights 0", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Search.VectorWeight, s.Search.TextWeight, s.Search.DecayWeight = ptr.To(0.0), ptr.To(0.0), ptr.To(0.0)
		}), "spec.search: Invalid value: at least one of search.vectorWeight, textWeight, decayWeight must be above 0"},
		{"unknown text search configuration", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Search.TextSearchConfig = "klingon" }),
			`spec.search.textSearchConfig: Invalid value: "klingon": search.textSearchConfig must be one of the text search configurations PostgreSQL 17 ships: simple, arabic,`},
		{"text search configuration in capitals", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Search.TextSearchConfig = "German" }),
			"search.textSearchConfig must be one of the text search configurations PostgreSQL 17 ships"},
		{"text search configuration as SQL", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Search.TextSearchConfig = "english')--" }),
			"search.textSearchConfig must be one of the text search configurations PostgreSQL 17 ships"},
		{"ttl with words", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "a", TTL: "30 days"}}
		}), `spec.categories[0].ttl: Invalid value: "30 days": must be a whole number and one unit (s, m, h, d or w), such as 30d or 12h, or 0 for never`},
		{"halfLife in years", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "a", HalfLife: "1y"}}
		}), `spec.categories[0].halfLife: Invalid value: "1y": must be a whole number and one unit (s, m, h, d or w), such as 30d or 12h, or 0 for never`},
		{"purge after in minutes with a fraction", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Retention.PurgeInactiveAfter = "1.5h" }),
			`spec.retention.purgeInactiveAfter: Invalid value: "1.5h": must be a whole number and one unit (s, m, h, d or w), such as 30d or 12h, or 0 for never`},
		{"duplicate category", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "a"}, {Name: "a"}}
		}), `spec.categories[1]: Duplicate value: {"name":"a"}`},
		{"category name upper case", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "Identity"}}
		}), `spec.categories[0].name: Invalid value: "Identity": spec.categories[0].name in body should match '^[a-z][a-z0-9_-]*$'`},
		{"defaultTopK above maxTopK", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Search.DefaultTopK = 200 }),
			"spec: Invalid value: search.defaultTopK must not exceed limits.maxTopK"},
		{"unknown injection guard", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Redaction.InjectionGuard = "Maybe" }), `spec.redaction.injectionGuard: Unsupported value: "Maybe": supported values: "Reject", "Flag", "Off"`},
		{"owner size above the maximum", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Limits.MaxMemoriesPerOwner = 2001 }),
			"spec.limits.maxMemoriesPerOwner: Invalid value: 2001: spec.limits.maxMemoriesPerOwner in body should be less than or equal to 2000"},
		{"category priority too high", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "a", Priority: ptr.To[int32](1001)}}
		}), "spec.categories[0].priority: Invalid value: 1001: spec.categories[0].priority in body should be less than or equal to 1000"},
		{"category name too long", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: strings.Repeat("c", 33)}}
		}), "spec.categories[0].name: Too long: may not be more than 32 bytes"},
		{"33 categories", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			for i := range 33 {
				s.Categories = append(s.Categories, memoryv1alpha1.CategorySpec{Name: fmt.Sprintf("c%d", i)})
			}
		}), "spec.categories: Too many: 33: must have at most 32 items"},
		{"ttl 0d", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "a", TTL: "0d"}}
		}), `spec.categories[0].ttl: Invalid value: "0d": must be a whole number and one unit (s, m, h, d or w), such as 30d or 12h, or 0 for never`},
		{"ttl of seven digits", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "a", TTL: "1234567d"}}
		}), `spec.categories[0].ttl: Invalid value: "1234567d": must be a whole number and one unit (s, m, h, d or w), such as 30d or 12h, or 0 for never`},
		{"negative purge after", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Retention.PurgeInactiveAfter = "-1d" }),
			`spec.retention.purgeInactiveAfter: Invalid value: "-1d": must be a whole number and one unit (s, m, h, d or w), such as 30d or 12h, or 0 for never`},
		{"arbitration threshold negative", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Dedup.ArbitrationThreshold = -0.1 }),
			"spec.dedup: Invalid value: thresholds must satisfy 0 < arbitrationThreshold <= autoMergeThreshold <= 1"},
		{"unknown arbitration", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Dedup.Arbitration = "GPT" }), `spec.dedup.arbitration: Unsupported value: "GPT": supported values: "LLM", "None"`},
		{"content limit below 16", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Limits.MaxContentBytes = 10 }),
			"spec.limits.maxContentBytes: Invalid value: 10: spec.limits.maxContentBytes in body should be greater than or equal to 16"},
		{"owner size above the maximum", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Limits.MaxMemoriesPerOwner = 2001 }),
			"spec.limits.maxMemoriesPerOwner: Invalid value: 2001: spec.limits.maxMemoriesPerOwner in body should be less than or equal to 2000"},
		{"maxTopK above 1000", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Limits.MaxTopK = 5000 }), "spec.limits.maxTopK: Invalid value: 5000: spec.limits.maxTopK in body should be less than or equal to 1000"},
		{"facts per extraction above 100", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Limits.MaxFactsPerExtraction = 101 }),
			"spec.limits.maxFactsPerExtraction: Invalid value: 101: spec.limits.maxFactsPerExtraction in body should be less than or equal to 100"},
		{"min decay score above 1", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Forgetting.MinDecayScore = ptr.To(1.5) }),
			"spec.forgetting.minDecayScore: Invalid value: 1.5: spec.forgetting.minDecayScore in body should be less than or equal to 1"},
		{"negative text weight", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Search.TextWeight = ptr.To(-0.5) }),
			"spec.search.textWeight: Invalid value: -0.5: spec.search.textWeight in body should be greater than or equal to 0"},
		{"empty redaction pattern", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Redaction.Patterns = []string{""} }),
			`spec.redaction.patterns[0]: Invalid value: "": spec.redaction.patterns[0] in body should be at least 1 chars long`},
		{"negative compaction threshold", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Conversation.Compaction.Threshold = -0.5 }),
			"spec.conversation.compaction.threshold: Invalid value: -0.5: conversation.compaction.threshold must be above 0 and at most 1"},
		{"compaction threshold above 1", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Conversation.Compaction.Threshold = 1.5 }),
			"spec.conversation.compaction.threshold: Invalid value: 1.5: conversation.compaction.threshold must be above 0 and at most 1"},
		{"condense group of one", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Conversation.Compaction.CondenseGroupSize = 1 }),
			"spec.conversation.compaction.condenseGroupSize: Invalid value: 1: conversation.compaction.condenseGroupSize must be within 2..64: a condensed summary covers at least two summaries"},
		{"summary depth 9", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Conversation.Compaction.MaxDepth = 9 }),
			"spec.conversation.compaction.maxDepth: Invalid value: 9: conversation.compaction.maxDepth must be within 1..8"},
		{"chunk of one message", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Conversation.Compaction.ChunkSize = 1 }),
			"spec.conversation.compaction.chunkSize: Invalid value: 1: spec.conversation.compaction.chunkSize in body should be greater than or equal to 2"},
		{"unknown window strategy", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Conversation.Window.Strategy = "all" }),
			`spec.conversation.window.strategy: Unsupported value: "all": supported values: "buffer", "token", "summary"`},
		{"window budget above a million", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Conversation.Window.Budget = 2_000_000 }),
			"spec.conversation.window.budget: Invalid value: 2000000: spec.conversation.window.budget in body should be less than or equal to 1000000"},
		{"fresh tail above 100", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Conversation.Window.FreshTail = 101 }),
			"spec.conversation.window.freshTail: Invalid value: 101: spec.conversation.window.freshTail in body should be less than or equal to 100"},
		{"session idle ttl in words", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Conversation.SessionIdleTTL = "a week" }),
			`spec.conversation.sessionIdleTTL: Invalid value: "a week": must be a whole number and one unit (s, m, h, d or w), such as 30d or 12h, or 0 for never`},
		{"archive after the idle ttl", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Conversation.SessionIdleTTL, s.Conversation.ArchiveAfter = "2w", "30d"
		}), "spec.conversation: Invalid value: conversation.archiveAfter must be shorter than conversation.sessionIdleTTL: sessions would be deleted before they are archived"},
		{"global and protected category", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "company", Global: true, Protected: true}}
		}), "spec.categories[0]: Invalid value: a global category cannot also be protected: global categories already accept writes only from source user or system, and protected would shut out the system"},
		{"category description too long", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Categories = []memoryv1alpha1.CategorySpec{{Name: "a", Description: strings.Repeat("d", 501)}}
		}), "spec.categories[0].description: Too long: may not be more than 500 bytes"},
		{"messages per turn above 500", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Conversation.Limits.MaxMessagesPerTurn = 501 }),
			"spec.conversation.limits.maxMessagesPerTurn: Invalid value: 501: spec.conversation.limits.maxMessagesPerTurn in body should be less than or equal to 500"},
		{"turn shorter than one append", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			s.Conversation.Limits.MaxMessagesPerTurn, s.Conversation.Limits.MaxTurnMessages = 100, 99
		}), "spec.conversation.limits: Invalid value: conversation.limits.maxTurnMessages must be at least maxMessagesPerTurn: one append may carry that many messages of one turn"},
		{"turn tokens below 1000", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Conversation.Limits.MaxTurnTokens = 10 }),
			"spec.conversation.limits.maxTurnTokens: Invalid value: 10: conversation.limits.maxTurnTokens must be within 1000..1000000 (the largest window budget)"},
		{"messages per session above a million", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Conversation.Limits.MaxMessagesPerSession = 1_000_001 }),
			"spec.conversation.limits.maxMessagesPerSession: Invalid value: 1000001: conversation.limits.maxMessagesPerSession must be within 1..1000000"},
		{"negative sessions per owner", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Limits.MaxSessionsPerOwner = -1 }),
			"spec.limits.maxSessionsPerOwner: Invalid value: -1: limits.maxSessionsPerOwner must be within 1..1000000"},
		{"episodes per owner above 10000", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Limits.MaxEpisodesPerOwner = 10_001 }),
			"spec.limits.maxEpisodesPerOwner: Invalid value: 10001: limits.maxEpisodesPerOwner must be within 1..10000: episode search and context read all of an owner's episodes"},
		{"document versions above 10000", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Limits.MaxDocumentVersions = 10_001 }),
			"spec.limits.maxDocumentVersions: Invalid value: 10001: limits.maxDocumentVersions must be within 1..10000"},
		{"documents per owner above 10000", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Limits.MaxDocumentsPerOwner = 10_001 }),
			"spec.limits.maxDocumentsPerOwner: Invalid value: 10001: limits.maxDocumentsPerOwner must be within 1..10000"},
		{"negative history rows per memory", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Limits.MaxHistoryPerMemory = -1 }),
			"spec.limits.maxHistoryPerMemory: Invalid value: -1: limits.maxHistoryPerMemory must be within 1..10000"},
		{"redaction pattern too long", pol(func(s *memoryv1alpha1.MemoryPolicySpec) { s.Redaction.Patterns = []string{strings.Repeat("a", 513)} }),
			"spec.redaction.patterns[0]: Too long: may not be more than 512 bytes"},
		{"33 redaction patterns", pol(func(s *memoryv1alpha1.MemoryPolicySpec) {
			for i := range 33 {
				s.Redaction.Patterns = append(s.Redaction.Patterns, fmt.Sprintf("p%d", i))
			}
		}), "spec.redaction.patterns: Too many: 33: must have at most 32 items"},
		// RetentionJob
		{"pacing duty 0", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) {
			s.Pacing = &memoryv1alpha1.PacingSpec{DutyPercent: ptr.To[int32](0)}
		}),
			"spec.pacing.dutyPercent: Invalid value: 0: pacing.dutyPercent must be within 5..100 (100 = no pause)"},
		{"pacing rows per second 0", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) {
			s.Pacing = &memoryv1alpha1.PacingSpec{RowsPerSecond: ptr.To[int64](0)}
		}),
			"spec.pacing.rowsPerSecond: Invalid value: 0: pacing.rowsPerSecond must be within 1..10000000"},
		{"schedule in words", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Schedule = "every night" }), `spec.schedule: Invalid value: "every night": schedule must be 5 cron fields separated by single spaces (minute hour day-of-month month day-of-week), e.g. "0 3 * * *", or a macro like @daily; put the time zone in timeZone, not in schedule`},
		{"schedule with seconds", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Schedule = "0 0 3 * * *" }), `spec.schedule: Invalid value: "0 0 3 * * *": schedule must be 5 cron fields separated by single spaces (minute hour day-of-month month day-of-week), e.g. "0 3 * * *", or a macro like @daily; put the time zone in timeZone, not in schedule`},
		{"time zone in schedule", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Schedule = "CRON_TZ=UTC 0 3 * * *" }),
			`spec.schedule: Invalid value: "CRON_TZ=UTC 0 3 * * *": schedule must be 5 cron fields separated by single spaces (minute hour day-of-month month day-of-week), e.g. "0 3 * * *", or a macro like @daily; put the time zone in timeZone, not in schedule`},
		{"bad time zone", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.TimeZone = ptr.To("not a zone!") }),
			`spec.timeZone: Invalid value: "not a zone!": timeZone must be an IANA time zone name such as UTC or Europe/Berlin`},
		{"ref and selector", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) {
			s.RuntimeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}), "spec: Invalid value: set exactly one of runtimeRef or runtimeSelector"},
		{"no target", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.RuntimeRef = nil }), "spec: Invalid value: set exactly one of runtimeRef or runtimeSelector"},
		{"no operations", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Operations = []memoryv1alpha1.Operation{} }), "spec.operations: Invalid value: 0: spec.operations in body should have at least 1 items"},
		{"repeated operation", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) {
			s.Operations = []memoryv1alpha1.Operation{"purge", "purge"}
		}), `spec.operations[1]: Duplicate value: "purge"`},
		{"unknown operation", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Operations = []memoryv1alpha1.Operation{"vacuum"} }),
			`spec.operations[0]: Unsupported value: "vacuum": supported values: "decay", "expire", "purge", "compact"`},
		{"unknown concurrency policy", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.ConcurrencyPolicy = "Sometimes" }),
			`spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"`},
		{"negative history", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.FailedJobsHistoryLimit = ptr.To[int32](-1) }),
			"spec.failedJobsHistoryLimit: Invalid value: -1: spec.failedJobsHistoryLimit in body should be greater than or equal to 0"},
		{"retention job name too long", rj(strings.Repeat("j", 41), func(*memoryv1alpha1.RetentionJobSpec) {}),
			"metadata.name must be at most 40 characters so that CronJob and Job names derived from it fit"},
		{"schedule @reboot", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Schedule = "@reboot" }), `spec.schedule: Invalid value: "@reboot": schedule must be 5 cron fields separated by single spaces (minute hour day-of-month month day-of-week), e.g. "0 3 * * *", or a macro like @daily; put the time zone in timeZone, not in schedule`},
		{"empty schedule", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Schedule = "" }), `spec.schedule: Invalid value: "": spec.schedule in body should be at least 1 chars long`},
		{"eight operations", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) {
			s.Operations = []memoryv1alpha1.Operation{"decay", "expire", "purge", "compact", "summarize", "sessions", "export", "decay"}
		}), "spec.operations: Too many: 8: must have at most 7 items"},
		{"unknown operation", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Operations = []memoryv1alpha1.Operation{"summarise"} }),
			`spec.operations[0]: Unsupported value: "summarise": supported values: "decay", "expire", "purge", "compact", "summarize", "sessions", "export"`},
		{"export without a destination", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Operations = []memoryv1alpha1.Operation{"export"} }),
			"operations lists export: set spec.export to a pvc or an s3 destination"},
		{"a destination without export", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.Export = validExportS3() }),
			"spec.export is used by the export operation only: add export to operations, or remove spec.export"},
		{"export to two destinations", exportRJ(func(e *memoryv1alpha1.ExportSpec) {
			e.PVC = &memoryv1alpha1.ExportPVC{ClaimName: "backups"}
		}), "spec.export needs exactly one destination: set either pvc or s3"},
		{"export to no destination", exportRJ(func(e *memoryv1alpha1.ExportSpec) { e.S3 = nil }),
			"spec.export needs exactly one destination: set either pvc or s3"},
		{"export bucket name", exportRJ(func(e *memoryv1alpha1.ExportSpec) { e.S3.Bucket = "My_Bucket" }),
			"spec.export.s3.bucket must be an S3 bucket name: 3 to 63 lower-case letters, digits, '.' and '-'"},
		{"export endpoint with credentials", exportRJ(func(e *memoryv1alpha1.ExportSpec) { e.S3.Endpoint = "https://key:secret@s3.example" }),
			"spec.export.s3.endpoint must be an http:// or https:// URL without credentials, query or fragment"},
		{"export endpoint without scheme", exportRJ(func(e *memoryv1alpha1.ExportSpec) { e.S3.Endpoint = "s3.example" }),
			"spec.export.s3.endpoint must be an http:// or https:// URL"},
		{"export prefix from the root", exportRJ(func(e *memoryv1alpha1.ExportSpec) { e.S3.Prefix = "/engram/" }),
			"spec.export.s3.prefix must not start with '/' nor hold '//'"},
		{"export bucket too long", exportRJ(func(e *memoryv1alpha1.ExportSpec) { e.S3.Bucket = strings.Repeat("b", 64) }),
			"spec.export.s3.bucket: Too long: may not be more than 63 bytes"},
		{"export without a Secret", exportRJ(func(e *memoryv1alpha1.ExportSpec) { e.S3.CredentialsSecretRef.Name = "" }),
			"spec.export.s3.credentialsSecretRef.name in body should be at least 1 chars long"},
		{"export claim name", exportRJ(func(e *memoryv1alpha1.ExportSpec) {
			e.S3, e.PVC = nil, &memoryv1alpha1.ExportPVC{ClaimName: "Backups!"}
		}), "spec.export.pvc.claimName must be a Kubernetes object name"},
		{"export subPath out of the claim", exportRJ(func(e *memoryv1alpha1.ExportSpec) {
			e.S3, e.PVC = nil, &memoryv1alpha1.ExportPVC{ClaimName: "backups", SubPath: "engram/../../etc"}
		}), "spec.export.pvc.subPath must be a relative path without '..'"},
		{"deadline of 0 seconds", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.ActiveDeadlineSeconds = ptr.To[int64](0) }),
			"spec.activeDeadlineSeconds: Invalid value: 0: spec.activeDeadlineSeconds in body should be greater than or equal to 1"},
		{"history above 100", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.SuccessfulJobsHistoryLimit = ptr.To[int32](101) }),
			"spec.successfulJobsHistoryLimit: Invalid value: 101: spec.successfulJobsHistoryLimit in body should be less than or equal to 100"},
		{"runtime ref without a name", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.RuntimeRef = &memoryv1alpha1.LocalObjectReference{} }),
			`spec.runtimeRef.name: Invalid value: "": spec.runtimeRef.name in body should be at least 1 chars long`},
		{"time zone of four parts", rj("j", func(s *memoryv1alpha1.RetentionJobSpec) { s.TimeZone = ptr.To("Europe/Berlin/Mitte/Nord") }),
			`spec.timeZone: Invalid value: "Europe/Berlin/Mitte/Nord": timeZone must be an IANA time zone name such as UTC or Europe/Berlin`},
	}
}
