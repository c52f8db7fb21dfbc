package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The API server's audit log names every write: who sent it, to which
// object, when. The operator part records writes (not reads) at Metadata
// level, so an idle write can be shown, not only counted.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

type auditEvent struct {
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

// auditWrites returns the writes of user completed within [from, to).
func auditWrites(path, user string, from, to time.Time) ([]auditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" || ev.User.Username != user {
			continue
		}
		if ev.StageTimestamp.Before(from) || !ev.StageTimestamp.Before(to) {
			continue
		}
		out = append(out, ev)
	}
	return out, sc.Err()
}

// String is "verb resource[/subresource] namespace/name (code)".
func (ev auditEvent) String() string {
	r := ev.ObjectRef.Resource
	if ev.ObjectRef.Subresource != "" {
		r += "/" + ev.ObjectRef.Subresource
	}
	return fmt.Sprintf("%s %s %s/%s (%d)", ev.Verb, r, ev.ObjectRef.Namespace, ev.ObjectRef.Name, ev.ResponseStatus.Code)
}

// describeWrites renders up to n audited writes, sorted; for an Event it
// adds what the Event says (reason, regarding object, series count), so an
// idle write can be traced to the code that emitted it.
func describeWrites(ctx context.Context, c client.Reader, evs []auditEvent, n int) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		d := ev.String()
		if ev.ObjectRef.Resource == "events" {
			var e eventsv1.Event
			if err := c.Get(ctx, client.ObjectKey{Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name}, &e); err == nil {
				count := int32(1)
				if e.Series != nil {
					count = e.Series.Count
				}
				d += fmt.Sprintf(": event %s/%s on %s %s, series count %d, %q", e.Reason, e.Action, e.Regarding.Kind, e.Regarding.Name, count, truncate(e.Note, 120))
			}
		}
		out = append(out, d)
	}
	sort.Strings(out)
	return out[:min(n, len(out))]
}
