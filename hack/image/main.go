// Command image builds Engram's container image without a Docker engine
// (`make image`): an empty base, the static manager binary of each
// platform, a non-root user, and the OCI labels, as a multi-arch OCI image
// index written to an OCI layout directory, a tarball of that directory
// (`docker load` with the containerd image store, `crane push`, skopeo),
// and one `docker load` tarball per platform for the classic Docker store.
//
// It is a module of its own so go-containerregistry stays out of the
// product's go.mod; the product's test/image reads what it writes with the
// standard library only. The Dockerfile builds the equivalent image for
// users with Docker (same binary flags, user, entrypoint and labels; its
// distroless base also carries CA certificates and time zones, which this
// build adds as files).
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Fixed facts of the image; test/image and the Dockerfile check the same.
const (
	user       = "65532:65532"
	binaryPath = "/manager"
	// zoneinfoPath is Go's own time zone database; ZONEINFO points at it,
	// so RetentionJob time zones resolve on the empty base.
	zoneinfoPath = "/usr/share/zoneinfo.zip"
	caPath       = "/etc/ssl/certs/ca-certificates.crt"
)

type options struct {
	binaries    map[string]string // arch -> path of the linux binary
	out         string            // directory for the layout and tarballs
	tag         string
	version     string
	revision    string
	created     time.Time
	caBundle    string
	zoneinfo    string
	description string
}

func main() {
	var err error
	if len(os.Args) > 1 && os.Args[1] == "static" {
		err = runStatic(os.Args[2:]) // static.go: the node's one-binary images
	} else {
		err = run(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var perArch []struct {
		arch string
		img  v1.Image
	}
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := buildImage(o, arch)
		if err != nil {
			return fmt.Errorf("building the %s image: %w", arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch},
		}})
		perArch = append(perArch, struct {
			arch string
			img  v1.Image
		}{arch, img})
	}
	return write(o, idx, perArch)
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	amd64 := fs.String("binary-amd64", "", "static linux/amd64 manager binary")
	arm64 := fs.String("binary-arm64", "", "static linux/arm64 manager binary")
	o := &options{}
	fs.StringVar(&o.out, "out", "dist/image", "output directory")
	fs.StringVar(&o.tag, "tag", "ghcr.io/engram-dev/engram:dev", "image reference recorded in the layout and the docker tarballs")
	fs.StringVar(&o.version, "version", "dev", "org.opencontainers.image.version")
	fs.StringVar(&o.revision, "revision", "", "org.opencontainers.image.revision (the git commit)")
	fs.StringVar(&o.caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA certificates to include (for HTTPS to embedding and LLM APIs)")
	fs.StringVar(&o.zoneinfo, "zoneinfo", "", "Go's zoneinfo.zip (default: $(go env GOROOT)/lib/time/zoneinfo.zip)")
	epoch := fs.Int64("source-date-epoch", envInt("SOURCE_DATE_EPOCH"), "creation time in Unix seconds (reproducible builds; default 0)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.binaries = map[string]string{"amd64": *amd64, "arm64": *arm64}
	for arch, p := range o.binaries {
		if p == "" {
			return nil, fmt.Errorf("--binary-%s is required", arch)
		}
	}
	if o.zoneinfo == "" {
		o.zoneinfo = filepath.Join(goroot(), "lib", "time", "zoneinfo.zip")
	}
	o.created = time.Unix(*epoch, 0).UTC()
	if _, err := name.ParseReference(o.tag); err != nil {
		return nil, fmt.Errorf("--tag %q: %w", o.tag, err)
	}
	return o, nil
}

// Labels are the OCI annotations of the image config (the Dockerfile's LABELs).
func labels(o *options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "engram",
		"org.opencontainers.image.description": "Kubernetes operator for managed, isolated agent memory on PostgreSQL with pgvector",
		"org.opencontainers.image.source":      "https://github.com/engram-dev/engram",
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.created":     o.created.Format(time.RFC3339),
	}
	if o.revision != "" {
		l["org.opencontainers.image.revision"] = o.revision
	}
	return l
}

// buildImage is one platform's image: one layer on the empty base.
func buildImage(o *options, arch string) (v1.Image, error) {
	layerTar, err := rootfs(o, arch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("making the layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.created}, CreatedBy: "hack/image: " + binaryPath + " (static), CA certificates, zoneinfo, passwd",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: o.created}
	cf.Config.User = user
	cf.Config.Entrypoint = []string{binaryPath}
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/", "ZONEINFO=" + zoneinfoPath, "SSL_CERT_FILE=" + caPath}
	cf.Config.Labels = labels(o)
	return mutate.ConfigFile(img, cf)
}

// rootfs is the layer: the binary, the CA bundle, the zone database and
// passwd/group entries naming the non-root user, owned by root and
// read-only except the binary's execute bits (a read-only root filesystem
// is all the image needs).
func rootfs(o *options, arch string) ([]byte, error) {
	bin, err := os.ReadFile(o.binaries[arch])
	if err != nil {
		return nil, fmt.Errorf("reading the %s binary: %w", arch, err)
	}
	if err := checkELF(bin, arch); err != nil {
		return nil, fmt.Errorf("%s: %w", o.binaries[arch], err)
	}
	ca, err := os.ReadFile(o.caBundle)
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle (--ca-bundle): %w", err)
	}
	zi, err := os.ReadFile(o.zoneinfo)
	if err != nil {
		return nil, fmt.Errorf("reading Go's zoneinfo.zip (--zoneinfo): %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := []string{"etc/", "etc/ssl/", "etc/ssl/certs/", "tmp/", "usr/", "usr/share/"}
	for _, d := range dirs {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode, ModTime: o.created}); err != nil {
			return nil, err
		}
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{"etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")},
		{strings.TrimPrefix(caPath, "/"), 0o644, ca},
		{strings.TrimPrefix(zoneinfoPath, "/"), 0o644, zi},
		{strings.TrimPrefix(binaryPath, "/"), 0o755, bin},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: o.created}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkELF refuses a binary of another architecture or a dynamic one
// (the empty base has no libc).
func checkELF(b []byte, arch string) error {
	if len(b) < 20 || string(b[:4]) != "\x7fELF" {
		return errors.New("not an ELF binary")
	}
	machine := uint16(b[18]) | uint16(b[19])<<8
	want := map[string]uint16{"amd64": 62, "arm64": 183}[arch]
	if machine != want {
		return fmt.Errorf("ELF machine %d, want %d (%s)", machine, want, arch)
	}
	if bytes.Contains(b, []byte("/lib64/ld-linux")) || bytes.Contains(b, []byte("/lib/ld-linux")) {
		return errors.New("dynamically linked; build with CGO_ENABLED=0")
	}
	return nil
}

// write puts the index into an OCI layout, tars the layout, and writes a
// docker-load tarball per platform.
func write(o *options, idx v1.ImageIndex, perArch []struct {
	arch string
	img  v1.Image
}) error {
	dir := filepath.Join(o.out, "oci")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("creating the OCI layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.tag})); err != nil {
		return fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := tarDir(dir, filepath.Join(o.out, "engram-oci.tar")); err != nil {
		return err
	}
	ref, err := name.ParseReference(o.tag)
	if err != nil {
		return err
	}
	for _, pa := range perArch {
		path := filepath.Join(o.out, "engram-docker-"+pa.arch+".tar")
		if err := tarball.WriteToFile(path, ref, pa.img); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("image index %s (%s)\n  OCI layout   %s\n  OCI tarball  %s\n  docker load  %s, %s\n",
		d, o.tag, dir, filepath.Join(o.out, "engram-oci.tar"),
		filepath.Join(o.out, "engram-docker-amd64.tar"), filepath.Join(o.out, "engram-docker-arm64.tar"))
	return nil
}

// tarDir writes the files of dir into a tar at path (paths relative to dir).
func tarDir(dir, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			h.Name += "/"
		}
		h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname = time.Unix(0, 0), 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func envInt(k string) int64 {
	var n int64
	_, _ = fmt.Sscan(os.Getenv(k), &n)
	return n
}

// goroot is the GOROOT of the go command on PATH.
func goroot() string {
	if r := os.Getenv("GOROOT"); r != "" {
		return r
	}
	out, err := execOutput("go", "env", "GOROOT")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}
