// Package controller holds the reconcilers of Engram's three kinds —
// MemoryRuntime, MemoryPolicy and RetentionJob; the pure builders of the
// objects they own are in package specs. Setup wires them into a
// controller-runtime manager; the `manager` command, the tests, the demo and
// the e2e suite all go through it.
//
// Conventions (so every reconciler reads the same way):
//   - Reconcile is a list of phase functions; each phase sets the conditions
//     it is responsible for and may stop the list.
//   - Status is patched once per reconcile, in a defer, and only when it changed.
//   - Owned objects are built by pure functions (package specs) and written
//     with server-side apply under the field owner "engram-operator", but only
//     after a comparison with the cached live object says something differs:
//     an idle, Ready system makes zero API writes.
//   - Every name, label and annotation comes from internal/naming; names
//     derived from a MemoryRuntime object (schema, endpoint) from runtime_names.go.
package controller
