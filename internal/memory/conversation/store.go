package conversation

import "github.com/engram-dev/engram/internal/memory/core"

// Store is the conversation memory of one tenant: sessions, their
// messages, the summary DAG and the windows built from them, over the
// engine's shared state. The façade (memory.Store) holds one and delegates
// its conversation methods to it. It is safe for concurrent use.
type Store struct {
	core *core.State
	sql  tables
	docs DocumentVersions
}

// DocumentVersions is what conversation memory needs of long-term memory:
// a new session pins the current versions of its agent's profile and
// constraints (its snapshot). The façade passes long-term memory's; the
// interface keeps this package from importing it.
type DocumentVersions interface {
	// PinnedVersionsSQL is a select list of two bigint expressions, the
	// current profile and constraints versions (0 = none), for the owner
	// and agent expressions given (placeholders such as "$1").
	PinnedVersionsSQL(owner, agent string) string
}

// tables are the quoted names of conversation memory's tables.
type tables struct {
	sessions, messages, summaries, summarySources string
}

// New returns the conversation store over st; docs gives the versions a
// new session pins.
func New(st *core.State, docs DocumentVersions) *Store {
	return &Store{core: st, docs: docs, sql: tables{
		sessions:       st.Table("sessions"),
		messages:       st.Table("messages"),
		summaries:      st.Table("summaries"),
		summarySources: st.Table("summary_sources"),
	}}
}
