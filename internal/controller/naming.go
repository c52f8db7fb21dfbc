package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/tenant"
)

// FieldOwner is the server-side apply field manager of every write of the operator.
const FieldOwner = "engram-operator"

// Finalizer keeps a MemoryRuntime until its reclaim policy has been carried out.
const Finalizer = "memory.engram.dev/reclaim"

// Labels of every owned object (the contract with the service and the jobs).
const (
	LabelName         = "app.kubernetes.io/name"
	LabelInstance     = "app.kubernetes.io/instance"
	LabelComponent    = "app.kubernetes.io/component"
	LabelManagedBy    = "app.kubernetes.io/managed-by"
	LabelRuntime      = "memory.engram.dev/runtime"
	LabelRetentionJob = "memory.engram.dev/retention-job"

	// AppName is the value of app.kubernetes.io/name.
	AppName = "engram"
	// ManagedBy is the value of app.kubernetes.io/managed-by; the operator's
	// caches only hold objects carrying it (except Secrets).
	ManagedBy = "engram-operator"
)

// Values of app.kubernetes.io/component.
const (
	ComponentService     = "memory-service"
	ComponentJob         = "maintenance-job"
	ComponentCredentials = "credentials"
	ComponentConfig      = "config"
)

// Annotations the operator writes.
const (
	// AnnotationConfigHash on the pod template: a hash of the resolved config
	// and of the credentials, so a policy change or a rotation rolls the pods.
	AnnotationConfigHash = "memory.engram.dev/config-hash"
	// AnnotationPasswordHash on the <runtime>-db Secret: SHA-256 of the
	// password the operator wrote, so a hand-edited password is detected.
	AnnotationPasswordHash = "memory.engram.dev/password-sha256"
	// AnnotationAppliedHash on every applied object: a hash of what the
	// operator applied last. Comparing it detects a field the operator stopped
	// setting, which a subset comparison of the live object cannot see.
	AnnotationAppliedHash = "memory.engram.dev/applied-hash"
	// AnnotationInstantiate marks a Job created by hand from a CronJob (the
	// same annotation `kubectl create job --from=cronjob/...` sets).
	AnnotationInstantiate = "cronjob.kubernetes.io/instantiate"
)

// Keys of the owned Secrets and ConfigMap (the contract).
const (
	KeyURI      = "uri"
	KeyHost     = "host"
	KeyPort     = "port"
	KeyDBName   = "dbname"
	KeyUser     = "user"
	KeyPassword = "password"
	KeySchema   = "schema"
	KeyTokens   = "tokens"
	// KeySigningKey of the <runtime>-api-token Secret: base64 of 32 random
	// bytes (one key a line) that verify signed tokens.
	KeySigningKey = "signing-key"
	KeyConfig     = "config.yaml"
	ContainerSvc  = "memory"
	ContainerJob  = "job"
	PortName      = "http"
)

// Paths inside the containers (the contract).
const (
	ConfigDir          = "/etc/engram/config"
	TokensDir          = "/etc/engram/tokens"
	ConfigPath         = ConfigDir + "/" + KeyConfig
	TokensPath         = TokensDir + "/" + KeyTokens
	SigningKeyPath     = TokensDir + "/" + KeySigningKey
	TerminationLogPath = "/dev/termination-log"
	BinaryPath         = "/manager"
)

// Environment variables of the service and job containers (the contract).
const (
	EnvDatabaseURL     = "ENGRAM_DATABASE_URL"
	EnvEmbeddingAPIKey = "ENGRAM_EMBEDDING_API_KEY"
	EnvLLMAPIKey       = "ENGRAM_LLM_API_KEY"
)

// Shutdown of the memory service pods: on SIGTERM the service fails
// /readyz and keeps serving for the delay (endpoints drop the pod), then
// finishes in-flight requests within the timeout; the grace period covers
// both with a margin, so the kubelet never kills a request mid-way.
const (
	ServiceShutdownDelay    = 5 * time.Second
	ServiceShutdownTimeout  = 25 * time.Second
	ServiceTerminationGrace = ServiceShutdownDelay + ServiceShutdownTimeout + 5*time.Second
)

// NonRootUID is the uid (and gid) of distroless' "nonroot" user.
const NonRootUID int64 = 65532

// Kubernetes name limits.
const (
	maxLabelValue   = 63
	maxCronJobName  = 52 // the CronJob controller appends "-<11 digits>" to name Jobs
	maxJobName      = 63 // a Job's name becomes a label value of its pods
	hashSuffixBytes = 4  // 8 hex digits
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

// Endpoint is the in-cluster URL of a runtime's memory service.
func Endpoint(rt *memoryv1alpha1.MemoryRuntime) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", ServiceName(rt.Name), rt.Namespace, rt.ServicePort())
}

// SchemaFor is the tenant schema of a runtime: spec.database.schema; else
// the schema its status already records (runtimes of earlier releases keep
// the name they were provisioned with); else the name derived from
// namespace and name. Which runtime may use a schema is decided by the UID
// marker in PostgreSQL, not by this name.
func SchemaFor(rt *memoryv1alpha1.MemoryRuntime) string {
	if rt.Spec.Database.Schema != "" {
		return rt.Spec.Database.Schema
	}
	if rt.Status.Schema != "" {
		return rt.Status.Schema
	}
	return tenant.SchemaName(rt.Namespace, rt.Name)
}

// TenantOwner is the ownership record of a runtime in PostgreSQL.
func TenantOwner(rt *memoryv1alpha1.MemoryRuntime) tenant.Owner {
	return tenant.Owner{UID: string(rt.UID), Namespace: rt.Namespace, Name: rt.Name}
}

// TenantClaim says when this runtime may take an existing schema that does
// not carry its UID: recorded, before this reconcile, in its own status
// (an upgrade from markers without UID), or named by the adopt annotation.
func TenantClaim(rt *memoryv1alpha1.MemoryRuntime, recordedSchema, schema string) tenant.Claim {
	return tenant.Claim{
		LegacySchema: recordedSchema != "" && recordedSchema == schema,
		AdoptFromUID: rt.Annotations[memoryv1alpha1.AnnotationAdoptFromUID],
	}
}

// CronJobName is the CronJob of retention job rj for one runtime:
// "<rj>-<runtime>", cut to 52 characters with a hash suffix when longer.
func CronJobName(rj, runtime string) string {
	return fitName(rj+"-"+runtime, maxCronJobName)
}

// RunNowJobName is the Job started for a run-now annotation value: derived
// from the value, so the same value never starts a second Job.
func RunNowJobName(cronJob, value string) string {
	return cronJob + "-" + shortHash(value, 5)
}

// RuntimeLabels are the labels of an object owned by a runtime.
func RuntimeLabels(runtime, component string) map[string]string {
	return map[string]string{
		LabelName:      AppName,
		LabelInstance:  runtime,
		LabelComponent: component,
		LabelManagedBy: ManagedBy,
		LabelRuntime:   runtime,
	}
}

// SelectorLabels select the memory service pods of a runtime. They are a
// subset of RuntimeLabels that never changes (a Deployment's selector is immutable).
func SelectorLabels(runtime string) map[string]string {
	return map[string]string{
		LabelName:      AppName,
		LabelInstance:  runtime,
		LabelComponent: ComponentService,
	}
}

// JobLabels are the labels of a retention job's CronJob, its Jobs and pods.
func JobLabels(retentionJob, runtime string) map[string]string {
	l := RuntimeLabels(runtime, ComponentJob)
	l[LabelRetentionJob] = retentionJob
	return l
}

// ManagedSelector is the label selector of every object the operator owns.
func ManagedSelector() string { return LabelManagedBy + "=" + ManagedBy }

// connectionID names one admin connection in the pool cache.
func connectionID(rt *memoryv1alpha1.MemoryRuntime) string {
	db := rt.Spec.Database
	if db.ClusterConnection != "" {
		return "cluster/" + db.ClusterConnection
	}
	return "secret/" + rt.Namespace + "/" + db.ConnectionSecretRef.Name + "/" + db.ConnectionSecretRef.KeyOr(memoryv1alpha1.DefaultConnectionKey)
}

// fitName returns name, or when it is longer than max, its first characters
// followed by "-" and a hash of the whole name, so two long names never collide.
func fitName(name string, max int) string {
	if len(name) <= max {
		return name
	}
	suffix := shortHash(name, hashSuffixBytes)
	head := strings.TrimRight(name[:max-len(suffix)-1], "-.")
	return head + "-" + suffix
}

// shortHash is n bytes of SHA-256 of s in hex.
func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:n])
}

// sha256Hex is the whole SHA-256 of b in hex.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
