package controller

import (
	"cmp"
	"fmt"
	"testing"
	"time"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// placementStall is how long placedAll waits for the next runtime of a
// fleet to be placed.
const placementStall = 60 * time.Second

// placedAll waits until every runtime of names (in namespace ns) has its
// status.database, and returns where each one is. The runtimes of one
// namespace are reconciled one at a time (namespace_slots.go), so when the
// last of them is placed depends on how long each pass takes on the
// machine: under load 10-14, waiting a fixed minute for the first one
// checked (TestOperator/Databases, "bot-0 not placed within 1m") measured
// how many of the other runtimes' passes fitted in a minute, not whether
// placement works. It fails when placementStall passes without one more of
// them placed: placement stalled.
//
// A function, not a method: operatorEnv is at the 60 methods a type may have.
func placedAll(e *operatorEnv, t *testing.T, ns string, names []string) map[string]string {
	t.Helper()
	placed := map[string]string{}
	start, progress := time.Now(), time.Now()
	var order []string // when each one was seen placed
	var last string    // what the first runtime not placed says
	for len(placed) < len(names) {
		last = ""
		for _, name := range names {
			if placed[name] != "" {
				continue
			}
			var rt memoryv1alpha1.MemoryRuntime
			switch err := e.get(t, ns, name, &rt); {
			case err != nil:
				last = cmp.Or(last, fmt.Sprintf("%s: %v", name, err))
			case rt.PlacedDatabase() != "":
				placed[name] = rt.PlacedDatabase()
				progress = time.Now()
				order = append(order, fmt.Sprintf("%s %s", name, time.Since(start).Round(100*time.Millisecond)))
			default:
				last = cmp.Or(last, fmt.Sprintf("%s: not placed; conditions %v", name, rt.Status.Conditions))
			}
		}
		if len(placed) == len(names) {
			t.Logf("placed: %v", order)
			break
		}
		if time.Since(progress) > placementStall {
			t.Fatalf("placement of %s stalled: %d of %d placed, none more for %s; %s", ns, len(placed), len(names), placementStall, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return placed
}
