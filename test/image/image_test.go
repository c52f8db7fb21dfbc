// Package image tests `make image`: it builds the multi-arch image with
// hack/image (go-containerregistry) from the static manager binaries, then
// reads the OCI layout with the standard library only — an independent
// reader — checking digests, platforms, user, entrypoint and labels, and
// runs the amd64 binary found in the image.
package image

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/testenv"
)

// The facts the image and the Dockerfile share.
const (
	wantUser       = "65532:65532"
	wantEntrypoint = "/manager"
)

var wantLabels = []string{
	"org.opencontainers.image.title", "org.opencontainers.image.description", "org.opencontainers.image.source",
	"org.opencontainers.image.licenses", "org.opencontainers.image.version", "org.opencontainers.image.revision",
	"org.opencontainers.image.created",
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	MediaType string       `json:"mediaType"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

type configFile struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Env        []string          `json:"Env"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

// buildImage builds both binaries (the Go build cache makes a second run a
// link step; the arm64 objects are cached like the amd64 ones) and runs
// hack/image into a temporary directory.
func buildImage(t *testing.T) string {
	t.Helper()
	root := testenv.RepoRoot()
	cache := filepath.Join(os.Getenv("ENGRAM_CACHE"), "image-bin")
	if os.Getenv("ENGRAM_CACHE") == "" {
		cache = filepath.Join(t.TempDir(), "bin")
	}
	bins := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		bins[arch] = filepath.Join(cache, "linux_"+arch, "manager")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bins[arch], "./cmd/manager")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building linux/%s: %v\n%s", arch, err, out)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("go", "run", ".", "--binary-amd64", bins["amd64"], "--binary-arm64", bins["arm64"],
		"--out", out, "--tag", "registry.example/engram:test", "--version", "v0.0.0-test", "--revision", "0123456789abcdef")
	cmd.Dir = filepath.Join(root, "hack", "image")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/image: %v\n%s", err, b)
	}
	return out
}

func TestImage(t *testing.T) {
	out := buildImage(t)
	layoutDir := filepath.Join(out, "oci")

	var layoutFile struct {
		Version string `json:"imageLayoutVersion"`
	}
	readJSON(t, filepath.Join(layoutDir, "oci-layout"), &layoutFile)
	if layoutFile.Version != "1.0.0" {
		t.Errorf("oci-layout version %q", layoutFile.Version)
	}
	var top index
	readJSON(t, filepath.Join(layoutDir, "index.json"), &top)
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" ||
		top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "registry.example/engram:test" {
		t.Fatalf("index.json = %+v, want one image index named registry.example/engram:test", top)
	}
	var idx index
	blobJSON(t, layoutDir, top.Manifests[0], &idx)
	var archs []string
	for _, m := range idx.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" || m.MediaType != "application/vnd.oci.image.manifest.v1+json" {
			t.Fatalf("index entry %+v", m)
		}
		archs = append(archs, m.Platform.Architecture)
		checkPlatform(t, layoutDir, m)
	}
	slices.Sort(archs)
	if !slices.Equal(archs, []string{"amd64", "arm64"}) {
		t.Errorf("platforms %v, want amd64 and arm64", archs)
	}

	for _, arch := range []string{"amd64", "arm64"} {
		if fi, err := os.Stat(filepath.Join(out, "engram-docker-"+arch+".tar")); err != nil || fi.Size() < 1<<20 {
			t.Errorf("docker-load tarball of %s: %v", arch, err)
		}
	}
	checkOCITarball(t, filepath.Join(out, "engram-oci.tar"), layoutDir)
}

// checkPlatform checks one platform's manifest, config and layer, and runs
// the binary when it is this machine's architecture.
func checkPlatform(t *testing.T, dir string, d descriptor) {
	arch := d.Platform.Architecture
	var m manifest
	blobJSON(t, dir, d, &m)
	if m.Config.MediaType != "application/vnd.oci.image.config.v1+json" || len(m.Layers) != 1 ||
		m.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Fatalf("%s manifest = %+v", arch, m)
	}
	var cf configFile
	blobJSON(t, dir, m.Config, &cf)
	if cf.OS != "linux" || cf.Architecture != arch {
		t.Errorf("%s config says %s/%s", arch, cf.OS, cf.Architecture)
	}
	if cf.Config.User != wantUser || !slices.Equal(cf.Config.Entrypoint, []string{wantEntrypoint}) {
		t.Errorf("%s: user %q entrypoint %q, want %q [%s]", arch, cf.Config.User, cf.Config.Entrypoint, wantUser, wantEntrypoint)
	}
	for _, l := range wantLabels {
		if cf.Config.Labels[l] == "" {
			t.Errorf("%s: label %s missing", arch, l)
		}
	}
	if cf.Config.Labels["org.opencontainers.image.version"] != "v0.0.0-test" || cf.Config.Labels["org.opencontainers.image.revision"] != "0123456789abcdef" {
		t.Errorf("%s labels %v", arch, cf.Config.Labels)
	}

	files := layerFiles(t, dir, m.Layers[0])
	for _, want := range []string{"manager", "etc/passwd", "etc/ssl/certs/ca-certificates.crt", "usr/share/zoneinfo.zip"} {
		if _, ok := files[want]; !ok {
			t.Errorf("%s layer lacks %s (has %v)", arch, want, keys(files))
		}
	}
	if h := files["manager"]; h != nil && h.mode&0o111 == 0 {
		t.Errorf("%s: /manager is not executable (%o)", arch, h.mode)
	}
	if h := files["etc/passwd"]; h != nil && !strings.Contains(string(h.data), ":65532:65532:") {
		t.Errorf("%s: /etc/passwd does not name uid 65532: %q", arch, h.data)
	}
	for _, env := range []string{"ZONEINFO=/usr/share/zoneinfo.zip", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"} {
		if !slices.Contains(cf.Config.Env, env) {
			t.Errorf("%s: env %v lacks %s", arch, cf.Config.Env, env)
		}
	}
	if arch != runtime.GOARCH || runtime.GOOS != "linux" {
		return
	}
	// The binary of the image runs here.
	bin := filepath.Join(t.TempDir(), "manager")
	if err := os.WriteFile(bin, files["manager"].data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "serve") || !strings.Contains(string(out), "job") {
		t.Errorf("/manager --help from the %s image: %v\n%s", arch, err, out)
	}
}

type file struct {
	mode int64
	data []byte
}

// layerFiles reads a gzip tar layer (regular files only).
func layerFiles(t *testing.T, dir string, d descriptor) map[string]*file {
	t.Helper()
	zr, err := gzip.NewReader(strings.NewReader(string(blob(t, dir, d))))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]*file{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s is owned by %d:%d, want root (the user cannot change the image)", h.Name, h.Uid, h.Gid)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(h.Name, "/")] = &file{mode: h.Mode, data: b}
	}
}

// blob reads a blob and checks its size and digest.
func blob(t *testing.T, dir string, d descriptor) []byte {
	t.Helper()
	algo, hexDigest, ok := strings.Cut(d.Digest, ":")
	if !ok || algo != "sha256" {
		t.Fatalf("digest %q", d.Digest)
	}
	b, err := os.ReadFile(filepath.Join(dir, "blobs", algo, hexDigest))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != hexDigest || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: digest or size (%d, want %d) does not match", d.Digest, len(b), d.Size)
	}
	return b
}

func blobJSON(t *testing.T, dir string, d descriptor, v any) {
	t.Helper()
	if err := json.Unmarshal(blob(t, dir, d), v); err != nil {
		t.Fatalf("blob %s: %v", d.Digest, err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// checkOCITarball: the tarball holds the layout's files, byte for byte.
func checkOCITarball(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, _ := io.ReadAll(tr)
		want, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(h.Name)))
		if err != nil || string(b) != string(want) {
			t.Errorf("%s in the tarball differs from the layout: %v", h.Name, err)
		}
		n++
	}
	if n < 7 { // oci-layout, index.json, image index, 2 manifests, 2 configs, 2 layers
		t.Errorf("the OCI tarball holds %d files", n)
	}
}

func keys(m map[string]*file) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestDockerfileEquivalent: the Dockerfile builds the same binary (static,
// same flags), runs it as the same user with the same entrypoint, and
// carries the same labels as hack/image.
func TestDockerfileEquivalent(t *testing.T) {
	df := readFile(t, "Dockerfile")
	builder := readFile(t, "hack/image/main.go")
	for _, want := range []string{"CGO_ENABLED=0", `-trimpath -ldflags="-s -w"`, "USER " + wantUser, `ENTRYPOINT ["` + wantEntrypoint + `"]`, "COPY --from=build /out/manager " + wantEntrypoint} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %s", want)
		}
	}
	for _, l := range wantLabels {
		if !strings.Contains(df, l+"=") {
			t.Errorf("Dockerfile lacks label %s", l)
		}
		if !strings.Contains(builder, `"`+l+`"`) {
			t.Errorf("hack/image lacks label %s", l)
		}
	}
	if !regexp.MustCompile(`(?m)^FROM gcr.io/distroless/static-debian12:nonroot`).MatchString(df) {
		t.Error("the Dockerfile's run stage is not distroless static nonroot (CA certificates, zoneinfo, uid 65532: what hack/image adds)")
	}
}

func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
