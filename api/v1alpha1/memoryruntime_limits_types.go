package v1alpha1

// ServiceLimits bound what the memory service does for one caller and what
// it answers.
//
// +kubebuilder:validation:XValidation:rule="!has(self.llmRateLimit) || self.llmRateLimit.requestsPerMinute <= (has(self.rateLimit) ? self.rateLimit.requestsPerMinute : 6000)",message="service.limits.llmRateLimit.requestsPerMinute must not exceed service.limits.rateLimit.requestsPerMinute (default 6000): every LLM-backed request also counts against rateLimit"
type ServiceLimits struct {
	// RateLimit is the token bucket of each credential (a static token's
	// name, a signed token's role, owner and subject) for every API request (/v1 and /mcp):
	// past it the service answers 429 with Retry-After. Default 6000 a
	// minute (100 a second) with bursts of 200: generous on purpose, to stop
	// one credential from taking the whole service, not normal use.
	// +optional
	RateLimit *RateLimit `json:"rateLimit,omitempty"`

	// LLMRateLimit is the second, lower bucket of each credential for the
	// requests that call the runtime's LLM (extract, session end,
	// compaction; the MCP tool extract_session), on top of rateLimit. An add
	// whose dedup would ask the LLM when the bucket is empty is stored
	// without asking it. Default 60 a minute with bursts of 20.
	// +optional
	LLMRateLimit *RateLimit `json:"llmRateLimit,omitempty"`

	// MaxResponseBytes caps the JSON size of every window, message list,
	// summary expansion, history search and context the service answers,
	// counted while the answer is built: what does not fit is left out and
	// the answer says so (truncated, and the seq range of the messages left
	// out). An MCP tool builds its answer within a third of it, since a
	// tool result carries the answer twice. Between 65536 (64 KiB) and
	// 67108864 (64 MiB); default 1048576 (1 MiB).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 65536 && self <= 67108864",message="service.limits.maxResponseBytes must be between 65536 (64 KiB) and 67108864 (64 MiB); leave it out for the default of 1048576 (1 MiB)"
	MaxResponseBytes int64 `json:"maxResponseBytes,omitempty"`

	// MaxInflightPerCredential is how many API requests one credential (a
	// static token's name, a signed token's role, owner and subject) may have in flight at
	// once in each replica, reading its body included: past it the service
	// answers 429 rate-limited with Retry-After 1. The rate limit bounds how
	// many requests a credential starts, this how many it holds at once, so
	// that one whose requests last (a body that trickles, an answer never
	// read) cannot hold the 64 requests a replica serves at once. Between 1
	// and 64; default 16.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self >= 1 && self <= 64",message="service.limits.maxInflightPerCredential must be between 1 and 64, the requests a replica serves at once; leave it out for the default of 16"
	MaxInflightPerCredential int32 `json:"maxInflightPerCredential,omitempty"`
}

// RateLimit is a token bucket: it refills at requestsPerMinute up to burst
// tokens, and each request takes one. Each replica keeps its own buckets.
type RateLimit struct {
	// RequestsPerMinute is the sustained rate (a minute, so that rates below
	// one a second can be written as integers).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=6000000
	RequestsPerMinute int32 `json:"requestsPerMinute"`

	// Burst is how many requests a credential may make at once after a pause.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	Burst int32 `json:"burst"`
}
