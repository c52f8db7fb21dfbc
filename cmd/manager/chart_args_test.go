package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestShippedOperatorArgsParse: the operator arguments the Helm chart
// renders with its default values, and those of config/manager, pass the
// operator's own flag checks. A chart that quoted a value into an argument
// (--tenant-temp-file-limit="2GB") once rendered and applied cleanly, and
// the operator then refused to start on every install.
func TestShippedOperatorArgsParse(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "engram-system")
	helm := testenv.Binary(t, "ENGRAM_HELM", "make test builds helm into ./bin and sets ENGRAM_HELM")
	root := testenv.RepoRoot()
	out, err := exec.Command(helm, "template", "engram", filepath.Join(root, "charts", "engram"), "--namespace", "engram-system").Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	config, err := os.ReadFile(filepath.Join(root, "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, manifest := range map[string][]byte{"the chart": out, "config/manager": config} {
		args := operatorArgs(t, manifest)
		if len(args) == 0 {
			t.Fatalf("%s: no operator container with arguments", name)
		}
		if _, err := parseControllerFlags(args, io.Discard); err != nil {
			t.Errorf("%s: the operator refuses its arguments %q: %v", name, args, err)
		}
	}
}

// operatorArgs returns the arguments of the container "manager" of the
// manifest's Deployment.
func operatorArgs(t *testing.T, manifest []byte) []string {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var d appsv1.Deployment
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			t.Fatalf("decoding the manifest: %v", err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "manager" {
				return c.Args
			}
		}
	}
}
