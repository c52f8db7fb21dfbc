package tenant

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The lock watchdog keeps the state of a quarantine in the role's
// ownership marker, next to the UID, so that every watchdog of the server
// (one per database and admin user) and a new leader agree on it: the
// marker is on the server, shared by every database, and only the
// operator writes it (COMMENT ON ROLE needs CREATEROLE with ADMIN on the
// role; a login role has neither). A role at CONNECTION LIMIT 0 without
// this state is a DBA's doing and is left alone (issue 26's fifth
// review).
//
//	managed-by=engram; uid=…; runtime=…; quarantined-until=<unix s>; strikes=<n>
//
// While quarantined-until is there the logins are refused; the watchdog
// that restores the limit writes quarantine-ended=<unix s> instead (with
// the strikes, so the next back-off within the cap doubles).
const (
	markerQuarantinedUntil = "quarantined-until"
	markerQuarantineEnded  = "quarantine-ended"
	markerStrikes          = "strikes"
)

// maxStrikes caps the strikes a marker or a watchdog counts. On a server a
// tenant runs (a proven connectionSecretRef), the tenant is superuser and
// writes any marker: strikes=MaxInt64 wrapped the watchdog's increment to
// a negative shift, a panic that took the operator down (issue 26's sixth
// review, MEDIUM 1). Past a few strikes the back-off is at its cap anyway.
const maxStrikes = 64

// quarantineMark is the quarantine state of a marker.
type quarantineMark struct {
	// until: logins refused until then (zero: no quarantine running or
	// waiting to be restored).
	until time.Time
	// ended: when the last quarantine ended (zero: none recorded).
	ended   time.Time
	strikes int
}

// active reports whether the marker records a quarantine not yet
// restored (its back-off may be over).
func (q quarantineMark) active() bool { return !q.until.IsZero() }

// parseQuarantine reads the quarantine fields of a marker's parts.
func (q *quarantineMark) parse(k, v string) {
	switch k {
	case markerQuarantinedUntil, markerQuarantineEnded:
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return
		}
		if k == markerQuarantinedUntil {
			q.until = time.Unix(s, 0)
		} else {
			q.ended = time.Unix(s, 0)
		}
	case markerStrikes:
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			q.strikes = min(n, maxStrikes)
		}
	}
}

// withQuarantine returns comment without its quarantine fields, followed
// by those of q.
func withQuarantine(comment string, q quarantineMark) string {
	var parts []string
	for part := range strings.SplitSeq(comment, ";") {
		part = strings.TrimSpace(part)
		k, _, _ := strings.Cut(part, "=")
		switch k {
		case markerQuarantinedUntil, markerQuarantineEnded, markerStrikes, "":
			continue
		}
		parts = append(parts, part)
	}
	switch {
	case q.active():
		parts = append(parts, fmt.Sprintf("%s=%d", markerQuarantinedUntil, q.until.Unix()))
	case !q.ended.IsZero():
		parts = append(parts, fmt.Sprintf("%s=%d", markerQuarantineEnded, q.ended.Unix()))
	}
	if q.strikes > 0 {
		parts = append(parts, fmt.Sprintf("%s=%d", markerStrikes, q.strikes))
	}
	return strings.Join(parts, "; ")
}
