// Command kube-scheduler is the upstream scheduler, built from Go modules for
// hack/cluster.sh.
package main

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/engram-dev/engram/tools/internal/component"
)

func main() {
	component.Main(app.NewSchedulerCommand())
}
