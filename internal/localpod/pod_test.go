package localpod

import "testing"

func TestMapPath(t *testing.T) {
	mounts := map[string]string{"/etc/engram/config": "/tmp/x/volumes/config", "/tmp": "/tmp/x/volumes/tmp", "/etc/engram/tokens": "/tmp/x/volumes/tokens"}
	paths := []string{"/etc/engram/config", "/etc/engram/tokens", "/tmp"}
	for in, want := range map[string]string{
		"--config=/etc/engram/config/config.yaml": "--config=/tmp/x/volumes/config/config.yaml",
		"--tokens-file=/etc/engram/tokens/tokens": "--tokens-file=/tmp/x/volumes/tokens/tokens",
		"/tmp/scratch":              "/tmp/x/volumes/tmp/scratch",
		"--ops=decay,expire":        "--ops=decay,expire",
		"/etc/engram/configuration": "/etc/engram/configuration",
	} {
		if got := mapPath(in, paths, mounts); got != want {
			t.Errorf("mapPath(%q) = %q, want %q", in, got, want)
		}
	}
}
