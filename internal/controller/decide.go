package controller

import (
	"time"
)

// The decisions of the phases, as pure functions of what a phase observed
// (and the spec): each phase reads ("observe"), calls one of these
// ("decide") and writes what it returns ("act"). They are table-tested in
// decide_test.go without a cluster or a database. (The ownership decision
// of provisioning lives beside the SQL that observes it:
// tenant.decideClaim and tenant.decideDimensions.)

// provisionObserved is what provision knows before it asks PostgreSQL.
type provisionObserved struct {
	// fingerprint sums up the inputs of a provisioning (schema,
	// dimensions, connection); last is the one of the last successful
	// provisioning this process did (empty: none, e.g. after a restart).
	fingerprint, last string
	dbReady           bool          // DatabaseReady is True
	rotateAsked       bool          // a rotate-credentials value not acted on yet
	sinceCheck        time.Duration // since that provisioning
	interval          time.Duration // Options.GrantCheckInterval
}

// decideProvision says whether to provision (or verify) the tenant now; when
// not, after how long it is due.
func decideProvision(o provisionObserved) (provision bool, dueIn time.Duration) {
	if o.last != o.fingerprint || !o.dbReady || o.rotateAsked || o.sinceCheck >= o.interval {
		return true, 0
	}
	return false, o.interval - o.sinceCheck
}

// credentialsObserved is what reconcileCredentials knows about the password.
type credentialsObserved struct {
	created     string // the password of a login role Provision just created
	found       bool   // the credentials Secret exists
	intact      bool   // its password matches its own digest (not edited by hand)
	stored      string // the password in it
	rotateAsked bool   // a rotate-credentials value not acted on yet
	rotateValue string
	moved       bool // a move to another server switched and the Secret still names the old one
}

// credentialsAction is what to do with the login password: keep (write
// password to the Secret) or rotate (ALTER ROLE with a new one, then write).
type credentialsAction struct {
	rotate   bool
	password string // when !rotate
	why      string // for the event
	metric   string // the reason label of engram_operator_password_rotations_total
	// action is the event's action. It names the cause because the events
	// API merges events that differ only in their note into one series that
	// keeps the first note: a Secret deleted after a hand edit showed
	// "changed by hand" again when the runtime's resourceVersion had not
	// moved between the two.
	action string
}

// decideCredentials: a new role brings its password; otherwise a requested
// rotation, a missing Secret or a hand-edited password costs a new one (the
// old one cannot be read back from PostgreSQL); otherwise the stored one stays.
func decideCredentials(o credentialsObserved) credentialsAction {
	switch {
	case o.created != "":
		return credentialsAction{password: o.created}
	case o.rotateAsked:
		return credentialsAction{rotate: true, why: "the rotate-credentials annotation changed to " + o.rotateValue, metric: "requested", action: "RotateRequested"}
	case o.moved:
		return credentialsAction{rotate: true, why: "the tenant moved to another server", metric: "moved", action: "RotateMoved"}
	case !o.found:
		return credentialsAction{rotate: true, why: "the credentials Secret was missing", metric: "secret_missing", action: "RotateSecretMissing"}
	case !o.intact:
		return credentialsAction{rotate: true, why: "the password in the credentials Secret was changed by hand", metric: "secret_edited", action: "RotateSecretEdited"}
	}
	return credentialsAction{password: o.stored}
}

// rotationPending reports whether the rotate-credentials annotation holds a
// value not acted on yet: neither recorded in status.rotatedCredentials nor
// (while the cache may lag behind that status write) in this process's memory.
func rotationPending(value, recorded, remembered string) bool {
	return value != "" && value != recorded && value != remembered
}

// decideRunNow says whether the run-now annotation value asks for a run not
// started yet (status.runNow records the last value acted on).
func decideRunNow(value, acted string) bool { return value != "" && value != acted }
