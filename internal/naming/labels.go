package naming

// Labels of every object the operator owns (the contract with the service,
// the jobs and the operator's own cache).
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

// LabelConnection marks an admin connection Secret in the operator
// namespace; its value is the name that spec.database.clusterConnection
// refers to. Users set it.
const LabelConnection = "memory.engram.dev/connection"

// Values of app.kubernetes.io/component.
const (
	ComponentService     = "memory-service"
	ComponentJob         = "maintenance-job"
	ComponentReembed     = "reembed-job"
	ComponentCredentials = "credentials"
	ComponentConfig      = "config"
)

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

// ManagedLabels select every object the operator owns: the operator's cache
// is restricted to them, and the local pod runner of the tests runs them.
func ManagedLabels() map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy}
}
