// Command kube-proxy is the upstream Service proxy (iptables mode on the
// node of hack/cluster.sh), built from Go modules.
package main

import (
	"k8s.io/kubernetes/cmd/kube-proxy/app"

	"github.com/engram-dev/engram/tools/internal/component"
)

func main() {
	component.Main(app.NewProxyCommand())
}
