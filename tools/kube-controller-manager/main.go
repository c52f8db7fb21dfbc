// Command kube-controller-manager is the upstream controller manager
// (Deployments, ReplicaSets, Jobs, CronJobs, ServiceAccounts...), built from
// Go modules for hack/cluster.sh.
package main

import (
	"os"
	_ "time/tzdata" // CronJob timeZone needs the zone database.

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
