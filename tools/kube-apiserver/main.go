// Command kube-apiserver is the upstream API server, built from Go modules so
// envtest needs no binary download.
package main

import (
	"os"
	_ "time/tzdata" // CronJob timeZone validation needs the zone database.

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
