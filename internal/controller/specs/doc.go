// Package specs builds the objects the operator owns — the memory
// service's Deployment, Service, ConfigMap and Secrets, its NetworkPolicy
// and PodDisruptionBudget, the maintenance CronJobs and run-now Jobs — from
// a MemoryRuntime and a RetentionJob.
//
// Every function here is pure: spec in, object out (owner reference,
// labels and annotations set), no client and no cluster, so each is tested
// with plain values and pinned by the golden files of
// internal/controller (TestGolden). The reconcilers in internal/controller
// decide when to build and apply them; nothing here reads or writes the
// API server (TestSpecsArePure).
package specs
