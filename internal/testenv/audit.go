package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// AuditEvent is what the suites read of one kube-apiserver audit event
// (audit.k8s.io/v1, one JSON object a line of the log): who sent which
// request to which object, its answer and when it completed.
type AuditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// String is "verb resource[/subresource] namespace/name (code)".
func (ev AuditEvent) String() string {
	r := ev.ObjectRef.Resource
	if ev.ObjectRef.Subresource != "" {
		r += "/" + ev.ObjectRef.Subresource
	}
	return fmt.Sprintf("%s %s %s/%s (%d)", ev.Verb, r, ev.ObjectRef.Namespace, ev.ObjectRef.Name, ev.ResponseStatus.Code)
}

// auditLineBytes bounds one line of the log: an event at Metadata level is
// a few KiB, a longer line is not one the suites asked the server for.
const auditLineBytes = 16 << 20

// AuditRequests reads an audit log (from wherever r stands) and returns the
// completed requests of user, in the log's order; lines that are not
// events are passed over. Which requests the log holds (writes only, say)
// is the audit policy's choice.
func AuditRequests(r io.Reader, user string) ([]AuditEvent, error) {
	var out []AuditEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), auditLineBytes)
	for sc.Scan() {
		var ev AuditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" || ev.User.Username != user {
			continue
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("reading the audit log: %w", err)
	}
	return out, nil
}
