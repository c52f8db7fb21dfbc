package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/testenv"
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

// auditWrites returns the writes of user completed within [from, to).
func auditWrites(path, user string, from, to time.Time) ([]testenv.AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	defer f.Close()
	evs, err := testenv.AuditRequests(f, user)
	if err != nil {
		return nil, err
	}
	var out []testenv.AuditEvent
	for _, ev := range evs {
		if !ev.StageTimestamp.Before(from) && ev.StageTimestamp.Before(to) {
			out = append(out, ev)
		}
	}
	return out, nil
}

// describeWrites renders up to n audited writes, sorted; for an Event it
// adds what the Event says (reason, regarding object, series count), so an
// idle write can be traced to the code that emitted it.
func describeWrites(ctx context.Context, c client.Reader, evs []testenv.AuditEvent, n int) []string {
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
