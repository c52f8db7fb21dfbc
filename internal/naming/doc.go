// Package naming owns every name Engram puts on the outside world: the
// names of the objects the operator creates, their labels and annotations,
// the finalizer and the field owner, the keys of the Secrets and the
// ConfigMap, the environment variables and mount paths of the service and
// job containers, and the helpers that fit a name into a length limit.
// The operator, the memory service, the maintenance jobs and the tests all
// read them from here, so a name is spelled once (the way Crunchy PGO's
// internal/naming does it).
//
// Dependency rule: naming imports the standard library only — no
// Kubernetes package, nothing of api/ or of internal/. Every package may
// import it, internal/memory included, without pulling Kubernetes in
// (docs/architecture.md: memory has no Kubernetes imports; api/ imports nothing of
// internal/). Helpers that need an API object (a runtime's schema, its
// endpoint) stay in internal/controller; they build on the names here.
//
// The annotations and the label users set on Engram's objects
// (rotate-credentials, adopt-from-uid, run-now, connection) live here too,
// not in api/v1alpha1: internal/tenant enforces adopt-from-uid and must not
// import api/, and one home for every key is simpler than two.
package naming
