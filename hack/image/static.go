package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// runStatic writes a one-layer linux/amd64 image whose entrypoint is one
// static binary, as a docker-load tarball: the sandbox image of the node
// of hack/cluster.sh and the suites' helper images, which no registry
// serves here (`ctr images import` loads the tarball).
//
//	go run ./hack/image static --binary PATH --tag REF --out FILE.tar [--user UID:GID]
func runStatic(args []string) error {
	fs := flag.NewFlagSet("image static", flag.ContinueOnError)
	bin := fs.String("binary", "", "static linux/amd64 binary, the image's only file and entrypoint")
	tag := fs.String("tag", "", "image reference recorded in the tarball")
	out := fs.String("out", "", "docker-load tarball to write")
	user := fs.String("user", "65535:65535", "user of the entrypoint")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" || *tag == "" || *out == "" {
		return fmt.Errorf("--binary, --tag and --out are required")
	}
	ref, err := name.ParseReference(*tag)
	if err != nil {
		return fmt.Errorf("--tag %q: %w", *tag, err)
	}
	data, err := os.ReadFile(*bin)
	if err != nil {
		return fmt.Errorf("reading --binary: %w", err)
	}
	if err := checkELF(data, "amd64"); err != nil {
		return fmt.Errorf("%s: %w", *bin, err)
	}
	img, err := staticImage("/"+filepath.Base(*bin), data, *user)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(*out, ref, img); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	return nil
}

// staticImage is the image of one file at path, run as user; every time
// stamp is zero so the same binary gives the same image digest.
func staticImage(path string, data []byte, user string) (v1.Image, error) {
	epoch := time.Unix(0, 0).UTC()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path[1:], Mode: 0o755, Size: int64(len(data)), ModTime: epoch}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("making the layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if img, err = mutate.AppendLayers(img, layer); err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", "amd64", v1.Time{Time: epoch}
	cf.Config.User = user
	cf.Config.Entrypoint = []string{path}
	cf.Config.WorkingDir = "/"
	return mutate.ConfigFile(img, cf)
}
