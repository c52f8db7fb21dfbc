package tenant

import (
	"fmt"
	"strings"
	"time"
)

// DefaultBlockerMaxAge is how long a transaction of another tenant may stay
// open while a provisioning statement waits for it before the operator
// ends it (the operator flag --tenant-blocker-max-age).
const DefaultBlockerMaxAge = 60 * time.Second

// defaultBlockerInterval is how often provisioning looks at what its
// statement waits for. The first look is after one interval, so a
// provisioning that does not wait opens no extra connection.
const defaultBlockerInterval = time.Second

// BlockerPolicy says how provisioning deals with the sessions its
// statements wait for. Any login role can hold a snapshot open
// (BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1;) and SET away every
// timeout its role has by default; each CREATE INDEX CONCURRENTLY of the
// database then waits for it. While provisioning runs, a watcher on a
// separate admin connection asks PostgreSQL who blocks the provisioning
// session (pg_blocking_pids) and ends (pg_terminate_backend) the sessions
// of another tenant's login role, proven by the ownership marker of the
// role, once they have been in the way too long. It never ends any other
// session: a DBA's, another application's, the tenant's own, a role
// without a marker with a UID. Those are reported and waited for, within
// the statement's timeout.
type BlockerPolicy struct {
	// MaxAge: a blocking session of another tenant is ended once its
	// transaction has been open this long, or once this provisioning has
	// waited this long in total for other tenants' sessions (so a tenant
	// that opens a new transaction for every statement gains nothing).
	// Zero means DefaultBlockerMaxAge.
	MaxAge time.Duration
	// Interval between two looks; zero means one second.
	Interval time.Duration
	// Report, when set, is called (from the watcher's goroutine) once for
	// each blocker ended, and once for each blocker that has been in the
	// way for MaxAge and that the watcher may not or could not end.
	Report func(Blocker)
	// LookDone, when set, is called (from the watcher's goroutine) after
	// each look, so that the reports of one look can be summed up.
	LookDone func()
}

func (p BlockerPolicy) maxAge() time.Duration {
	if p.MaxAge <= 0 {
		return DefaultBlockerMaxAge
	}
	return p.MaxAge
}

func (p BlockerPolicy) interval() time.Duration {
	if p.Interval <= 0 {
		return defaultBlockerInterval
	}
	return p.Interval
}

// lockTimeout is the lock timeout of a concurrent index build: long enough
// for the watcher to end another tenant's blocker (MaxAge, two looks) and
// report the others before the build gives up on them.
func (p BlockerPolicy) lockTimeout() time.Duration {
	return p.maxAge() + 2*p.interval() + 10*time.Second
}

// BlockerKind says whose a blocking session is.
type BlockerKind string

const (
	// BlockerOtherTenant: the login role of another MemoryRuntime (its
	// role comment carries Engram's marker with another UID).
	BlockerOtherTenant BlockerKind = "another tenant"
	// BlockerSameTenant: the login role of the runtime being provisioned.
	BlockerSameTenant BlockerKind = "the same tenant"
	// BlockerNotTenant: anything else (a DBA, another application, an
	// operator, a role without a marker with a UID): never ended.
	BlockerNotTenant BlockerKind = "not a tenant"
)

// Blocker is a session a provisioning statement waited for.
type Blocker struct {
	PID  int
	Role string
	Kind BlockerKind
	// Tenant is the runtime named by the role's marker (other or same
	// tenant only).
	Tenant Owner
	// OpenFor is how long its transaction had been open (at least as long
	// as it had been in the way, when PostgreSQL does not show the admin
	// the transaction's start: no pg_read_all_stats).
	OpenFor time.Duration
	// Waited is how long this provisioning had waited for other tenants.
	Waited time.Duration
	// Ended: the operator ended the session (pg_terminate_backend).
	Ended bool
	// Problem says why it was not ended, for humans; empty when Ended.
	Problem string
}

// String names the blocker for events and logs.
func (b Blocker) String() string {
	s := fmt.Sprintf("session %d of role %s", b.PID, b.Role)
	if b.Kind == BlockerOtherTenant || b.Kind == BlockerSameTenant {
		s += fmt.Sprintf(" (MemoryRuntime %s, %s)", b.Tenant.Runtime(), b.Kind)
	} else {
		s += " (" + string(b.Kind) + ")"
	}
	return s
}

// BlockedError is a provisioning error of a statement that waited for
// sessions it could not end: the message names them (and, when ending them
// was refused, the missing privilege), so the condition says who to ask.
// It names at most maxUnresolvedBlockers of them, and counts the rest
// (More, and any past that many in Blockers).
type BlockedError struct {
	Err      error
	Blockers []Blocker
	// More: blockers reported and not ended that Blockers does not hold.
	More int
}

func (e *BlockedError) Error() string {
	named := e.Blockers[:min(len(e.Blockers), maxUnresolvedBlockers)]
	parts := make([]string, 0, len(named)+1)
	for _, b := range named {
		p := b.String()
		if b.Problem != "" {
			p += ": " + b.Problem
		}
		parts = append(parts, p)
	}
	if more := e.More + len(e.Blockers) - len(named); more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more (each reported as an event)", more))
	}
	return fmt.Sprintf("%v (it waited for %s)", e.Err, strings.Join(parts, "; "))
}

func (e *BlockedError) Unwrap() error { return e.Err }
