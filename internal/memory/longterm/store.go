package longterm

import (
	"github.com/engram-dev/engram/internal/memory/conversation"
	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/write"
)

// Store is the long-term memory of one tenant (documents and episodes)
// over the engine's shared state. It is safe for concurrent use.
type Store struct {
	core *core.State
	conv *conversation.Store
	// w is the write path every extracted fact goes through.
	w   *write.Store
	sql tables
}

// tables are the quoted names of the tables long-term memory reads and
// writes: its own, and conversation memory's sessions and messages (an
// episode summarizes a session; a session pins document versions).
type tables struct {
	episodes, documents, docChanges, sessions, messages string
}

func newTables(st *core.State) tables {
	return tables{
		episodes:   st.Table("episodes"),
		documents:  st.Table("documents"),
		docChanges: st.Table("document_changes"),
		sessions:   st.Table("sessions"),
		messages:   st.Table("messages"),
	}
}

// New returns the long-term store over st, conv (whose reads and
// summarizer write episodes) and w (which extraction writes facts through).
func New(st *core.State, conv *conversation.Store, w *write.Store) *Store {
	return &Store{core: st, conv: conv, w: w, sql: newTables(st)}
}

// Pins gives conversation memory the document versions a new session pins
// (conversation.DocumentVersions) before a Store exists: conversation
// memory is made first, since long-term memory needs it.
func Pins(st *core.State) conversation.DocumentVersions {
	return pins{documents: st.Table("documents")}
}

type pins struct{ documents string }

// PinnedVersionsSQL is the select list of the profile and constraints
// versions a new session pins.
func (p pins) PinnedVersionsSQL(owner, agent string) string {
	return docVersionSQL(p.documents, owner, agent, DocProfile) + `, ` + docVersionSQL(p.documents, owner, agent, DocConstraints)
}
