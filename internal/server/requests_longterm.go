package server

import (
	"github.com/engram-dev/engram/internal/memory"
)

// Request and response bodies of long-term memory from conversations
// (session extraction and end, episodes, profile and constraints
// documents, changelog, snapshots, global memories; docs/long-term.md).
// As everywhere, the owner is the {owner} of the path, never in a body.

// sessionWriteBody is the optional body of extract and end: who the
// memories written are recorded as (capped by the credential; absent
// means agent).
type sessionWriteBody struct {
	Source memory.Source `json:"source,omitempty"`
}

// putDocumentBody replaces a profile or constraints document; the agent is
// the ?agent= of the URL, like on GET.
type putDocumentBody struct {
	Content string `json:"content"`
	// Source is capped by the credential; constraints accept only user.
	Source memory.Source `json:"source,omitempty"`
	// IfVersion makes the write conditional (409 when the document is at
	// another version; 0 = not written yet).
	IfVersion *int64 `json:"ifVersion,omitempty"`
}

// emptyBody is the optional body of a POST that takes no input.
type emptyBody struct{}

// episodeSearchResponse is the answer of an episode search: its results
// within the byte cap, and what the cap left out.
type episodeSearchResponse = memory.EpisodeSearchResult

// changelogResponse is one page of the changelog.
type changelogResponse = memory.ChangelogPage
