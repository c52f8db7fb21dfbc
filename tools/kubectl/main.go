// Command kubectl is the upstream CLI at the cluster's version, built from Go
// modules so the suites and the demo need no download and no host kubectl.
package main

import (
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // exec/OIDC auth of a user's own kubeconfig
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) //nolint:errcheck // only sets a flag value
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
