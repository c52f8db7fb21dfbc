// Package core holds what every part of the memory engine shares: State
// (the pool, the resolved policy, the model clients, the redactor, the
// byte cap; the façade builds it once and every part holds the same
// pointer) with the helpers over it (InTx, LockOwner, CleanWithin,
// AnswerCap, the maintenance batches), the typed errors the service maps to statuses (and
// DBErr, which classifies database errors into them), field validation
// (FieldErrors), ids and scope ids, the Source of a write and its trust
// order, the actor of a write, quota errors, the byte budget of an answer
// and the page scan, the SQL parameter list, Querier/DBTX and the page
// cursors.
//
// It sits above the engine's leaves (policy, pg) and below the parts
// (internal/memory/write, internal/memory/conversation,
// internal/memory/longterm, and the façade internal/memory), and
// imports none of them: TestEngineImportRule in internal/naming pins it
// (docs/architecture.md, "Inside internal/memory").
package core
