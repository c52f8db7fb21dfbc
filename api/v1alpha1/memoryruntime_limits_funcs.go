package v1alpha1

// Defaults of spec.service.limits, the same as `manager serve`'s flags
// (internal/server/options.go), and of the metrics port.
var (
	DefaultRateLimit    = RateLimit{RequestsPerMinute: 6000, Burst: 200}
	DefaultLLMRateLimit = RateLimit{RequestsPerMinute: 60, Burst: 20}
)

// DefaultMaxInflightPerCredential is spec.service.limits.maxInflightPerCredential's default.
const DefaultMaxInflightPerCredential int32 = 16

// DefaultMetricsPort is the port of the memory service's /metrics.
const DefaultMetricsPort int32 = 9090

// RateLimitOrDefault is spec.service.limits.rateLimit or its default.
func (r *MemoryRuntime) RateLimitOrDefault() RateLimit {
	if l := r.Spec.Service.Limits; l != nil && l.RateLimit != nil {
		return *l.RateLimit
	}
	return DefaultRateLimit
}

// LLMRateLimitOrDefault is spec.service.limits.llmRateLimit or its default.
func (r *MemoryRuntime) LLMRateLimitOrDefault() RateLimit {
	if l := r.Spec.Service.Limits; l != nil && l.LLMRateLimit != nil {
		return *l.LLMRateLimit
	}
	return DefaultLLMRateLimit
}

// MaxInflightPerCredentialOrDefault is spec.service.limits.maxInflightPerCredential or its default.
func (r *MemoryRuntime) MaxInflightPerCredentialOrDefault() int32 {
	if l := r.Spec.Service.Limits; l != nil && l.MaxInflightPerCredential > 0 {
		return l.MaxInflightPerCredential
	}
	return DefaultMaxInflightPerCredential
}

// MetricsPort is the port the memory service serves /metrics on, apart
// from the API: 9090, or 9091 when spec.service.port is 9090.
func (r *MemoryRuntime) MetricsPort() int32 {
	if r.ServicePort() == DefaultMetricsPort {
		return DefaultMetricsPort + 1
	}
	return DefaultMetricsPort
}
