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
