package node

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/testenv"
)

// leaderElection: the writes that are leader election itself, the Lease
// and the Event client-go records on it ("... became leader").
func leaderElection(resource, name string) bool {
	return resource == "leases" || resource == "events" && strings.HasPrefix(name, leaseName+".")
}

// leaseName is the operator's leader election Lease (cmd/manager).
const leaseName = "engram-operator.memory.engram.dev"

// auditLog reads the node API server's audit log from a mark on.
type auditLog struct {
	path   string
	offset int64
}

// auditMark is the end of the audit log now (nil off the node).
func (e *env) auditMark(t *testing.T) *auditLog {
	t.Helper()
	if !e.cl.ours {
		return nil
	}
	out, err := scriptOutput(context.Background(), "status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(line, "audit-log "); ok {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			return &auditLog{path: p, offset: fi.Size()}
		}
	}
	t.Fatalf("hack/cluster.sh status names no audit log:\n%s", out)
	return nil
}

// operatorWrites lists the write requests of the operator's ServiceAccount
// since the mark, leader election aside (it renews its Lease, and the new
// leader's Event says it took over).
func (a *auditLog) operatorWrites(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(a.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, 0); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + operatorNamespace + ":" + operatorDeployment
	evs, err := testenv.AuditRequests(f, user)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		if !leaderElection(ev.ObjectRef.Resource, ev.ObjectRef.Name) {
			out = append(out, ev.String())
		}
	}
	return out
}
