package v1alpha1

// RerankingSpec names a reranker: an optional second stage of vector and
// hybrid search. The first stage picks topN candidates; the reranker, a
// server with the /rerank API that text-embeddings-inference, Jina and
// Cohere share, orders them by relevance to the query. When it fails, is
// slower than timeout, or answers nonsense, the first-stage order is
// returned and the answer says so (reranked: false).
type RerankingSpec struct {
	// Endpoint is the full URL of the rerank API, for example
	// http://tei-reranker:8080/rerank, https://api.jina.ai/v1/rerank or
	// https://api.cohere.com/v2/rerank.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="reranking.endpoint must be an http or https URL, such as http://tei-reranker:8080/rerank"
	Endpoint string `json:"endpoint"`

	// Model is the reranking model name sent to the server (Jina and
	// Cohere need one; text-embeddings-inference serves one model and
	// ignores it).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model,omitempty"`

	// API is the request shape the server reads: "cohere" sends the
	// candidates as "documents" (Cohere and Jina), "tei" as "texts"
	// (text-embeddings-inference). Absent, both fields are sent, which
	// each of the three servers accepts at twice the bytes per search.
	// +optional
	// +kubebuilder:validation:Enum=cohere;tei
	API string `json:"api,omitempty"`

	// APIKeySecretRef names the Secret key (default "apiKey") holding the
	// API key, sent as a Bearer token. The Secret is read in the namespace
	// of each runtime that uses this policy.
	// +optional
	APIKeySecretRef *SecretKeySelector `json:"apiKeySecretRef,omitempty"`

	// TopN is how many first-stage candidates the reranker orders, 1..200
	// (default 50). A search asks the first stage for max(topN, topK).
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 200",message="reranking.topN must be within 1..200: every candidate's text is sent to the reranker on each search"
	TopN int32 `json:"topN,omitempty"`

	// Timeout bounds one rerank call: a duration such as "500ms" or "2s",
	// between 100ms and 30s (default 2s). Past it the search answers in
	// the first-stage order with reranked: false.
	// +optional
	// +kubebuilder:default="2s"
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ms|s|m))+$') && duration(self) >= duration('100ms') && duration(self) <= duration('30s')",message="reranking.timeout must be a duration such as 500ms or 2s, between 100ms and 30s"
	Timeout string `json:"timeout,omitempty"`
}
