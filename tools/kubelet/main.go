// Command kubelet is the upstream node agent, built from Go modules for the
// single-node cluster of hack/cluster.sh (no binary download needed).
package main

import (
	"context"

	"k8s.io/kubernetes/cmd/kubelet/app"

	"github.com/engram-dev/engram/tools/internal/component"
)

func main() {
	component.Main(app.NewKubeletCommand(context.Background()))
}
