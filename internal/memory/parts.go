package memory

// The engine's behaviour is split by idea. *Store is the façade: the
// exported methods the service, the jobs and the tests call. The state
// every part shares is core.State (s.core: pool, policy, model clients,
// redactor, byte cap; inTx and lockOwner run on it), so a part moved to a
// package of its own holds the same pointer: conversation memory is
// conversation.Store (s.conv, internal/memory/conversation), documents,
// episodes and extraction are longterm.Store (s.lt,
// internal/memory/longterm), and the one
// write path of memories — prepare, dedup, the owner's transaction, merge,
// arbitration, the Citus worker add, eviction — is write.Store (s.w,
// internal/memory/write), which Add, AddBatch, Extract and session
// extraction all call. The unexported behaviour still here lives on one
// type per idea, each defined as Store, so all share the Store's fields and
// converting between them is free:
//
//	reader         search, context, lists and pages, the byte cap (search.go, crud.go, …)
//	longTerm       what of long-term memory reads memories: global memories,
//	               the context's sections (ltm_*.go)
//	maintenance    the maintenance runs and their lease (jobs.go, compactrun.go, …)
//
// A call into another part is written as a conversion, e.g.
// (*reader)(s).load(...): each part's dependencies on the others are
// visible at the call site, and are what a package of its own would import.
type (
	reader      Store
	longTerm    Store
	maintenance Store
)
