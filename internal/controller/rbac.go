package controller

// Least privilege of the operator, generated into config/rbac/role.yaml by
// `make manifests`. Each line says why it is needed.

// Read the three kinds; patch MemoryRuntimes to add and remove the finalizer.
// +kubebuilder:rbac:groups=memory.engram.dev,resources=memoryruntimes;memorypolicies;retentionjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=memory.engram.dev,resources=memoryruntimes,verbs=patch
// Status is written through the status subresource only.
// +kubebuilder:rbac:groups=memory.engram.dev,resources=memoryruntimes/status;memorypolicies/status;retentionjobs/status,verbs=get;patch
// MemoryDatabases (cluster-scoped) are read, and their status kept.
// +kubebuilder:rbac:groups=memory.engram.dev,resources=memorydatabases,verbs=get;list;watch
// +kubebuilder:rbac:groups=memory.engram.dev,resources=memorydatabases/status,verbs=get;patch
// Namespace labels decide which MemoryDatabases admit a tenant
// (spec.allowedNamespaces); the cache keeps names and labels only.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// Owner references with blockOwnerDeletion need update on the owner's finalizers.
// +kubebuilder:rbac:groups=memory.engram.dev,resources=memoryruntimes/finalizers;retentionjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=cronjobs/finalizers,verbs=update

// Owned objects: server-side apply is a patch (create when the object is new).
// Secrets: the cache holds only Engram's own (label selector); the Secrets
// users name (connection, API keys) are read with get, and watched
// metadata-only. RBAC cannot tell a metadata-only list/watch from a full
// one, so list and watch stay; what changed is what the operator keeps.
// +kubebuilder:rbac:groups="",resources=secrets;configmaps;services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// The NetworkPolicy in front of each memory service; deleted when a runtime
// turns it off (spec.service.networkPolicy.enabled: false).
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// The PodDisruptionBudget of each memory service of more than one replica;
// deleted when the replicas drop to one or it is turned off.
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// CronJobs of runtimes no longer targeted are deleted; run-now creates Jobs.
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// Pods of finished maintenance Jobs are listed for their termination message.
// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// Events about real changes.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
