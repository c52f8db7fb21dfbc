package tenant

import "fmt"

// How many rows the operator acts on, one statement or one kept entry
// each, from one list a server gives. The answer bound (MaxServerAnswer)
// limits the bytes of one answer only and restarts at every statement the
// operator sends: a tenant's server whose list of 30 MiB drove one GRANT
// per row made the operator run 2.5 million statements and hold 489 MiB in
// one pass (issue 26's ninth review, HIGH 1). Each limit is sized to an
// honest server with room to spare; past it the pass fails with a
// *TooManyRowsError before it runs any statement for the list.
const (
	// maxNamespaceRoles: the login roles of one namespace on one server,
	// one per runtime (two on Citus). A namespace with a thousand runtimes
	// on one database would get a CONNECTION LIMIT of 1 each at the
	// default share of a big server already.
	maxNamespaceRoles = 1000
	// maxHorizonHolders: the sessions the reaper sees holding back the
	// horizon at once; at most max_connections on an honest server, which
	// is rarely over a few thousand.
	maxHorizonHolders = 10000
	// maxListedCitusWorkers: the active workers a Citus coordinator lists
	// (DetectCitus). The operator follows at most MaxCitusWorkers of the
	// platform's; the largest real clusters have a few hundred nodes.
	maxListedCitusWorkers = 1000
	// maxServerSessions: the sessions of one server the lock watchdog
	// counts (and may end) in one look, and those the blocker watch
	// keeps (seen) and may end: at most max_connections on an honest
	// server.
	maxServerSessions = 10000
	// maxChangeLines: the lines of Result.Changes or Warnings one step
	// writes about other runtimes' roles; the rest are counted in one
	// line.
	maxChangeLines = 20
)

// maxCitusHostBytes: the longest worker name DetectCitus keeps; a DNS name
// has at most 253 bytes.
const maxCitusHostBytes = 255

// TooManyRowsError: a server listed more rows than the operator acts on
// from one list (an honest server has far fewer); nothing of the list was
// acted on.
type TooManyRowsError struct {
	What  string // what the list holds, for humans
	Limit int
}

func (e *TooManyRowsError) Error() string {
	return fmt.Sprintf("the server lists more than %d %s, more than an honest server has; the operator acts on none of them", e.Limit, e.What)
}

// lineLog keeps the first maxChangeLines lines appended and counts the rest.
type lineLog struct {
	lines []string
	more  int
}

func (l *lineLog) add(line string) {
	if len(l.lines) < maxChangeLines {
		l.lines = append(l.lines, line)
		return
	}
	l.more++
}

// into appends the kept lines to dst, and one line saying how many more
// there were (what names them).
func (l *lineLog) into(dst []string, what string) []string {
	dst = append(dst, l.lines...)
	if l.more > 0 {
		dst = append(dst, fmt.Sprintf("and %d more %s", l.more, what))
	}
	return dst
}
