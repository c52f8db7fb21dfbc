package core

// Source says who wrote: the end user, the agent, the system or a job.
// Protected categories accept writes only from SourceUser.
type Source string

// Sources of a write.
const (
	SourceUser   Source = "user"
	SourceAgent  Source = "agent"
	SourceSystem Source = "system"
	SourceJob    Source = "job"
)

// sourceTrust orders the sources by how much a write of theirs is trusted,
// the one order both the API's credentials (capping what a client may
// assert: agent < system < user) and extraction use. job, which no
// client may assert, ranks above agent and below system: a maintenance job
// writes what the engine derived, no caller vouches for it. An unknown or
// empty source ranks 0, below every known one.
var sourceTrust = map[Source]int{SourceAgent: 1, SourceJob: 2, SourceSystem: 3, SourceUser: 4}

// Trust ranks s by how much a write of its source is trusted (higher is
// more); 0 for an unknown or empty source.
func (s Source) Trust() int { return sourceTrust[s] }

// LeastTrusted is the less trusted of a and b: what a write derived from
// text of both may be recorded as. Anything unknown becomes agent, the
// least a caller may assert.
func LeastTrusted(a, b Source) Source {
	if sourceTrust[b] < sourceTrust[a] {
		a = b
	}
	if sourceTrust[a] == 0 {
		return SourceAgent
	}
	return a
}
