package naming

// FieldOwner is the server-side apply field manager of every write of the operator.
const FieldOwner = "engram-operator"

// AnnotationPrefix begins every annotation the operator reads or writes.
const AnnotationPrefix = "memory.engram.dev/"

// Finalizer keeps a MemoryRuntime until its reclaim policy has been carried out.
const Finalizer = "memory.engram.dev/reclaim"

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

// AnnotationValuesOverBound is never written to the API server: the
// operator's Secret reader sets it on its own kept copy of a Secret to name
// (a few of) the keys whose values it did not keep because they are over its
// bounds, so a condition can say "too big" rather than "missing".
const AnnotationValuesOverBound = "memory.engram.dev/reader-values-over-bound"

// AnnotationCacheStub is never written to the API server: the operator's
// cache sets it on the stub it keeps in place of an object it does not keep
// whole (internal/controller/cache_stub.go), so a reader that needs the
// whole object reads it from the API server. The cache removes it from
// every object it keeps whole, so no one can set it.
const AnnotationCacheStub = "memory.engram.dev/cache-stub"

// AnnotationMetadataOverBound is never written to the API server: the
// operator's cache sets it on its copy of an Engram object whose labels or
// memory.engram.dev/ annotations are over the bounds it keeps (what the
// admission policy config/admission/metadata-bounds.yaml refuses), to say
// what it did not keep; the object's Ready condition repeats it.
const AnnotationMetadataOverBound = "memory.engram.dev/cache-metadata-over-bound"

// AnnotationSpecOverBound is never written to the API server: the
// operator's cache sets it on the reduced copy (identity, bounded labels,
// status; no spec) it keeps of an Engram object that holds more than its
// cap, with the object's estimated size in bytes; every reconciler then
// leaves the object's owned objects alone and says so in Ready.
const AnnotationSpecOverBound = "memory.engram.dev/cache-spec-over-bound"

// Annotations users set to ask for one-off actions (docs/crds.md).
const (
	// AnnotationRotateCredentials rotates the tenant role password when its value changes.
	AnnotationRotateCredentials = "memory.engram.dev/rotate-credentials"
	// AnnotationAdoptFromUID names the UID of a deleted MemoryRuntime of the
	// same namespace and name whose schema this runtime takes over (after a
	// restore from Git, which recreates runtimes with new UIDs). It is
	// honoured only when the schema's ownership marker carries exactly this
	// UID and this runtime's namespace/name (internal/tenant).
	AnnotationAdoptFromUID = "memory.engram.dev/adopt-from-uid"
	// AnnotationRunNow starts a RetentionJob run at once when its value changes.
	AnnotationRunNow = "memory.engram.dev/run-now"
	// AnnotationMoveToWorker (host:port) moves a runtime's schema to that
	// Citus worker when it is elsewhere (status.citusWorker, status.citusMove).
	AnnotationMoveToWorker = "memory.engram.dev/move-to-worker"
	// AnnotationMoveConfirmed ("<run>") confirms a move to another server
	// that switched (status.serverMove.run): with reclaimPolicy Delete the
	// old copy is dropped; with Retain it is kept and the status names it.
	AnnotationMoveConfirmed = "memory.engram.dev/move-confirmed"
)
