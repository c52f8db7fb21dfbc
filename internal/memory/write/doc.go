// Package write is the engine's one write path for memories: a write is
// prepared (validated, redacted, guarded, routed to the global owner when
// its category is global), embedded outside any transaction, planned with
// the arbiter when its Neighbour is in the arbitration band, then stored
// under the owner's lock in one transaction (the Neighbour lookup, merge,
// arbitration, insert), or on Citus by the worker's add_memory; eviction
// over the per-owner cap follows the commit. An add, a batch, Extract and
// a session's extraction all write through Store (Add, AddBatch, Store,
// WriteInTx): there is no second dedup or transaction path to keep in step.
//
// It sits over internal/memory/core and the leaves, and imports neither the
// façade internal/memory nor the other ideas (conversation, longterm):
// TestEngineImportRule in internal/naming pins it (docs/architecture.md,
// "Inside internal/memory").
package write
