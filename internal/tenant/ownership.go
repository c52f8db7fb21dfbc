package tenant

import (
	"errors"
	"fmt"
	"strings"

	"github.com/engram-dev/engram/internal/naming"
)

// Owner is the MemoryRuntime a tenant belongs to. Its UID is the proof of
// ownership: names can collide or be asked for, a UID cannot be chosen.
type Owner struct {
	UID       string
	Namespace string
	Name      string
}

// Runtime is "<namespace>/<name>", for humans.
func (o Owner) Runtime() string { return o.Namespace + "/" + o.Name }

// Claim says how a provisioning may take a schema or role that exists.
type Claim struct {
	// LegacySchema: the runtime's own status records this schema, from a
	// release that marked objects without a UID. Such objects are re-marked
	// once, if the schema's old comment names this runtime too.
	LegacySchema bool
	// AdoptFromUID: the previous owner's UID, from the adopt annotation
	// (disaster recovery recreates runtimes with new UIDs). Honoured only
	// when the marker carries exactly this UID and names this runtime's
	// namespace/name, so it never hands one tenant another's data.
	AdoptFromUID string
	// incoming: the caller is a relocation's Prepare, which may take the
	// target schema carrying this runtime's incoming marker (relocate.go).
	// Unexported: no other caller can ask for it.
	incoming bool
}

// Errors of ownership, for errors.Is.
var (
	// ErrNotManaged: the schema or role exists but Engram did not create it.
	ErrNotManaged = errors.New("not created by Engram")
	// ErrOwnedByOther: Engram created it for another MemoryRuntime.
	ErrOwnedByOther = errors.New("owned by another MemoryRuntime")
)

// markerPrefix starts the comment of every schema and role Engram creates.
const markerPrefix = "managed-by=engram"

// marker is a parsed ownership comment:
//
//	managed-by=engram; uid=<runtime UID>; runtime=<namespace>/<name>
//
// Releases before the UID wrote "managed-by=engram" on roles and
// "managed-by=engram; tenant=<namespace>/<name>" on schemas (legacy).
type marker struct {
	managed bool
	uid     string
	runtime string // runtime= (current) or tenant= (legacy)
	// quarantine is the lock watchdog's state (quarantinemarker.go).
	quarantine quarantineMark
	// relocate is the state of a schema in a move to another server
	// (relocate.go): relocateIncoming on the target until the move
	// finishes, relocateMoved on the source after it. Written as a suffix
	// of the UID (uid=<UID>+incoming), so that a parser that knows no
	// moves (an older operator) reads another UID: "owned by another
	// runtime", never a home. uid keeps the whole value; relocateUID is
	// the UID before the suffix.
	relocate    string
	relocateUID string
	// frozen: the schema's login role is frozen for a move (Freeze).
	frozen bool
	// movedTo names the server a moved schema went to, for humans.
	movedTo string
}

func (o Owner) marker() string {
	return fmt.Sprintf("%s; uid=%s; runtime=%s", markerPrefix, o.UID, o.Runtime())
}

// parseMarker reads a comment; nil (no comment) is not managed.
func parseMarker(comment *string) marker {
	if comment == nil || !strings.HasPrefix(*comment, markerPrefix) {
		return marker{}
	}
	m := marker{managed: true}
	for part := range strings.SplitSeq(*comment, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "uid":
			m.uid = v
			m.relocateUID, m.relocate = splitRelocate(v)
		case markerFrozen:
			m.frozen = v == frozenForMove
		case markerMovedTo:
			m.movedTo = v
		case "runtime", "tenant":
			m.runtime = v
		default:
			m.quarantine.parse(k, v)
		}
	}
	return m
}

// claimAction is what provisioning does with one object.
type claimAction int

const (
	claimCreate claimAction = iota // it does not exist: create it, marked
	claimOurs                      // it carries this runtime's UID
	claimRemark                    // legacy or adopted: write this runtime's marker
)

// decideClaim is the ownership rule for one existing (or missing) schema or
// role. kind and name are for the error message. A legacy role carries no
// runtime; it follows its schema (schemaLegacyOK).
func decideClaim(exists bool, m marker, o Owner, c Claim, kind, name string, schemaLegacyOK bool) (claimAction, error) {
	switch {
	case !exists:
		return claimCreate, nil
	case !m.managed:
		return 0, fmt.Errorf("%s %q exists and is %w (its comment has no %q marker); choose another spec.database.schema", kind, name, ErrNotManaged, markerPrefix)
	case m.uid == o.UID:
		return claimOurs, nil
	case m.relocate == relocateIncoming && m.relocateUID == o.UID && c.incoming:
		return claimOurs, nil
	case m.relocate != "":
		// Never a home, whatever the claim (an adopt annotation naming
		// "<UID>+incoming" included): a half copy or a stale one.
		return 0, fmt.Errorf("%s %q is %s of a move of MemoryRuntime %s (UID %s) to another server, not a tenant's home, and is %w; nothing was changed",
			kind, name, describeRelocate(m), describeRuntime(m.runtime), m.relocateUID, ErrOwnedByOther)
	case m.uid == "":
		legacyOK := c.LegacySchema && (m.runtime == o.Runtime() || (kind == "role" && schemaLegacyOK))
		if legacyOK {
			return claimRemark, nil
		}
		return 0, fmt.Errorf("%s %q was created by an earlier Engram release for %s and is %w; only the runtime whose status records it may take it over",
			kind, name, describeRuntime(m.runtime), ErrOwnedByOther)
	case c.AdoptFromUID != "" && c.AdoptFromUID == m.uid && m.runtime == o.Runtime():
		return claimRemark, nil
	case m.runtime == o.Runtime():
		return 0, fmt.Errorf("%s %q belongs to an earlier MemoryRuntime %s (UID %s) and is %w; to take it over after a restore, set the annotation %s=%s on this runtime",
			kind, name, m.runtime, m.uid, ErrOwnedByOther, naming.AnnotationAdoptFromUID, m.uid)
	default:
		return 0, fmt.Errorf("%s %q belongs to MemoryRuntime %s and is %w; nothing was changed: choose another spec.database.schema",
			kind, name, describeRuntime(m.runtime), ErrOwnedByOther)
	}
}

func describeRuntime(r string) string {
	if r == "" {
		return "an unknown runtime"
	}
	return r
}

// Schema marker fields of a move to another server (relocate.go).
const (
	relocateIncoming = "incoming"
	relocateMoved    = "moved"
	markerFrozen     = "frozen"
	frozenForMove    = "move"
	markerMovedTo    = "to"
)

// splitRelocate splits a marker's uid value "<UID>+<state>" into the UID
// and a known move state; any other value is no move state at all (its
// whole text stays the marker's uid, which matches no runtime's UID).
func splitRelocate(v string) (uid, state string) {
	base, st, ok := strings.Cut(v, "+")
	if !ok || base == "" || (st != relocateIncoming && st != relocateMoved) {
		return "", ""
	}
	return base, st
}

func describeRelocate(m marker) string {
	if m.relocate == relocateMoved {
		if m.movedTo != "" {
			return "the old copy (moved to " + m.movedTo + ")"
		}
		return "the old copy"
	}
	return "the incoming copy"
}

// relocateMarker is o's schema marker in move state state ("" is the
// normal marker), with the freeze field when frozen and the target's name
// when moved.
func (o Owner) relocateMarker(state string, frozen bool, to string) string {
	uid := o.UID
	if state != "" {
		uid += "+" + state
	}
	s := fmt.Sprintf("%s; uid=%s; runtime=%s", markerPrefix, uid, o.Runtime())
	if frozen {
		s += "; " + markerFrozen + "=" + frozenForMove
	}
	if to != "" {
		s += "; " + markerMovedTo + "=" + to
	}
	return s
}
