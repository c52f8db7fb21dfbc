package longterm

import "github.com/engram-dev/engram/internal/memory/core"

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x ChangelogEntry) JSONBound() int {
	return core.ListFixedBound + core.TextBound(x.Owner) + core.TextBound(x.Agent) + core.TextBound(string(x.Kind)) +
		core.TextBound(string(x.Source)) + core.TextBound(x.ActorID) + core.TextBound(x.Before) + core.TextBound(x.After)
}

// JSONBound bounds the JSON of x as an item of an answer (core.Bounded).
func (x EpisodeHit) JSONBound() int {
	e := &x.Episode
	return 2*core.ListFixedBound + core.TextBound(e.ID) + core.TextBound(e.Owner) + core.TextBound(e.SessionID) + core.TextBound(e.Agent) +
		core.TextBound(e.Summary) + core.TextBound(e.Method)
}
