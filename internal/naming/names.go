package naming

import "fmt"

// Kubernetes name limits.
const (
	// MaxLabelValue is the longest label value (and DNS-1123 label, such as
	// a Job's name).
	MaxLabelValue = 63
	// MaxCronJobName leaves room for the "-<11 digits>" the CronJob
	// controller appends to name its Jobs.
	MaxCronJobName = 52
	// MaxJobName: a Job's name becomes a label value of its pods.
	MaxJobName = MaxLabelValue
)

// CredentialsSecretName is the Secret with the tenant login role's credentials.
func CredentialsSecretName(runtime string) string { return runtime + "-db" }

// APITokenSecretName is the Secret with the memory service's bearer tokens.
func APITokenSecretName(runtime string) string { return runtime + "-api-token" }

// ConfigMapName is the ConfigMap with the resolved config of a runtime.
func ConfigMapName(runtime string) string { return runtime + "-config" }

// DeploymentName is the memory service Deployment of a runtime.
func DeploymentName(runtime string) string { return runtime }

// ServiceName is the memory service Service of a runtime.
func ServiceName(runtime string) string { return runtime }

// PodDisruptionBudgetName is the PodDisruptionBudget of a runtime's memory service.
func PodDisruptionBudgetName(runtime string) string { return runtime }

// CronJobName is the CronJob of retention job rj for one runtime:
// "<rj>-<runtime>", cut to MaxCronJobName characters with a hash suffix
// when longer.
func CronJobName(rj, runtime string) string {
	return FitDNSName(rj+"-"+runtime, MaxCronJobName)
}

// RunNowJobName is the Job started for a run-now annotation value: derived
// from the value, so the same value never starts a second Job. A CronJob
// name of MaxCronJobName characters gives exactly MaxJobName.
func RunNowJobName(cronJob, value string) string {
	return FitDNSName(cronJob+"-"+ShortHash(value, 5), MaxJobName)
}

// Keys of the owned Secrets and ConfigMap (the contract).
const (
	KeyURI      = "uri"
	KeyHost     = "host"
	KeyPort     = "port"
	KeyDBName   = "dbname"
	KeyUser     = "user"
	KeyPassword = "password"
	KeySchema   = "schema"
	// KeyTokens of the <runtime>-api-token Secret: static bearer tokens,
	// one a line (internal/auth.ParseTokens).
	KeyTokens = "tokens"
	// KeySigningKey of the <runtime>-api-token Secret: base64 of 32 random
	// bytes (one key a line) that verify signed tokens.
	KeySigningKey = "signing-key"
	KeyConfig     = "config.yaml"
)

// Containers and ports of the owned pods.
const (
	ContainerSvc = "memory"
	ContainerJob = "job"
	PortName     = "http"
	// MetricsPortName is the memory service's /metrics port, apart from
	// the API (PodMonitors select it by this name).
	MetricsPortName = "metrics"
	// PortNameTLS names the service port of a runtime with spec.service.tls.
	PortNameTLS = "https"
)

// ReembedJobName is the Job of a runtime's run-th re-embed run:
// "<runtime>-reembed-<run>", cut to MaxJobName with a hash when longer.
func ReembedJobName(runtime string, run int32) string {
	return FitDNSName(fmt.Sprintf("%s-reembed-%d", runtime, run), MaxJobName)
}
