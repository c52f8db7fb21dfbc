// Package component runs the command of an upstream Kubernetes component
// (kubelet, kube-controller-manager, kube-scheduler, kube-proxy) the way the
// component's own main does, with the side-effect imports each of them
// carries: the JSON logging format and the client-go and version metrics.
// Kept in one place so the four mains of hack/cluster.sh cannot drift.
package component

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
)

// Main runs cmd and exits with its status.
func Main(cmd *cobra.Command) {
	os.Exit(cli.Run(cmd))
}
