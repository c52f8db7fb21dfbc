// Command kube-controller-manager is the upstream controller manager
// (Deployments, ReplicaSets, Jobs, CronJobs, ServiceAccounts...), built from
// Go modules for hack/cluster.sh.
package main

import (
	_ "time/tzdata" // CronJob timeZone needs the zone database.

	"k8s.io/kubernetes/cmd/kube-controller-manager/app"

	"github.com/engram-dev/engram/tools/internal/component"
)

func main() {
	component.Main(app.NewControllerManagerCommand())
}
