package kubectlengram

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/testenv"
)

// TestProxyPath pins the service proxy URL: the port is picked by its
// name, so spec.service.port never matters, and names are escaped.
func TestProxyPath(t *testing.T) {
	got := ProxyPath("team-a", "support-bot", false, "/v1/owners/alice%40example.com/memories")
	want := "/api/v1/namespaces/team-a/services/support-bot:http/proxy/v1/owners/alice%40example.com/memories"
	if got != want {
		t.Errorf("ProxyPath = %q, want %q", got, want)
	}
	if p := ownerPath("a/b c", "/search"); p != "/v1/owners/a%2Fb%20c/search" {
		t.Errorf("ownerPath = %q", p)
	}
}

// TestProxyPathTLS: a runtime whose endpoint is https (spec.service.tls)
// is reached through the service proxy with the "https:" scheme prefix on
// its port "https": without it the API server would speak plain HTTP to a
// TLS port and get nothing but a handshake error.
func TestProxyPathTLS(t *testing.T) {
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "support-bot", Namespace: "team-a"}}
	rt.Status.Endpoint = "https://support-bot.team-a.svc:8080"
	a := &app{globals: globals{serviceToken: "t"}}
	s, err := a.openService(context.Background(), nil, rt)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ProxyPath(s.namespace, s.name, s.tls, "/v1/stats"), "/api/v1/namespaces/team-a/services/https:support-bot:https/proxy/v1/stats"; got != want {
		t.Errorf("proxy path of a TLS runtime = %q, want %q", got, want)
	}
	rt.Status.Endpoint = "http://support-bot.team-a.svc:8080"
	if s, _ := a.openService(context.Background(), nil, rt); s.tls {
		t.Error("a plain HTTP runtime is reached over TLS")
	}
}

// TestUsage: no arguments prints the usage with exit 2, --help with 0, an
// unknown command names itself.
func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), nil, &out, &errOut); code != 2 || !strings.Contains(out.String(), "kubectl engram status") {
		t.Errorf("no arguments: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := Main(context.Background(), []string{"--help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "rotate-credentials") {
		t.Errorf("--help: exit %d", code)
	}
	if code := Main(context.Background(), []string{"frobnicate"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, %q", code, errOut.String())
	}
}

// TestKrewManifest checks plugins/engram.yaml: the krew kind, the plugin
// name kubectl resolves (kubectl-engram -> kubectl engram), and one
// archive of that binary per supported platform.
func TestKrewManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "plugins", "engram.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string `json:"version"`
			ShortDescription string `json:"shortDescription"`
			Description      string `json:"description"`
			Homepage         string `json:"homepage"`
			Platforms        []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Bin    string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(raw, &m); err != nil {
		t.Fatalf("plugins/engram.yaml: %v", err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "engram" {
		t.Errorf("header = %s %s %s", m.APIVersion, m.Kind, m.Metadata.Name)
	}
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(m.Spec.Version) || m.Spec.ShortDescription == "" {
		t.Errorf("version %q, shortDescription %q", m.Spec.Version, m.Spec.ShortDescription)
	}
	seen := map[string]bool{}
	for _, p := range m.Spec.Platforms {
		osArch := p.Selector.MatchLabels["os"] + "_" + p.Selector.MatchLabels["arch"]
		seen[osArch] = true
		if p.Bin != "kubectl-engram" || !strings.HasSuffix(p.URI, "/"+m.Spec.Version+"/kubectl-engram_"+osArch+".tar.gz") ||
			!regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(p.SHA256) {
			t.Errorf("platform %s: bin %q uri %q sha256 %q", osArch, p.Bin, p.URI, p.SHA256)
		}
	}
	for _, want := range []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64"} {
		if !seen[want] {
			t.Errorf("no platform %s", want)
		}
	}
}

// The status screen names the Citus worker of a runtime on Citus and its
// last move (running or ended); a runtime on plain PostgreSQL shows neither line.
func TestStatusShowsCitusWorker(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	done := metav1.NewTime(now.Add(-2 * time.Minute))
	st := &RuntimeStatus{Namespace: "team-a", Name: "bot", Ready: "True", Schema: "engram_team_a_bot", SchemaVersion: 12,
		CitusWorker: "10.0.0.7:5432", CitusMove: &memoryv1alpha1.CitusMoveStatus{To: "10.0.0.7:5432", From: "10.0.0.6:5432",
			Result: memoryv1alpha1.CitusMoveSucceeded, Message: "moved in 5.4s", FinishedAt: &done}}
	var b strings.Builder
	if err := printRuntimeStatus(&b, st, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Citus worker:   10.0.0.7:5432\n", "Last move:      Succeeded to 10.0.0.7:5432, 2m ago: moved in 5.4s\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status screen lacks %q:\n%s", want, b.String())
		}
	}
	started := metav1.NewTime(now.Add(-30 * time.Second))
	st.CitusMove = &memoryv1alpha1.CitusMoveStatus{To: "10.0.0.6:5432", From: "10.0.0.7:5432", Result: memoryv1alpha1.CitusMoveRunning,
		Message: "copying to 10.0.0.6:5432: 12MiB of 40MiB", StartedAt: &started, CopiedBytes: 12 << 20, TotalBytes: 40 << 20}
	b.Reset()
	if err := printRuntimeStatus(&b, st, now); err != nil {
		t.Fatal(err)
	}
	if want := "Last move:      Running to 10.0.0.6:5432, started 30s ago: copying to 10.0.0.6:5432: 12MiB of 40MiB\n"; !strings.Contains(b.String(), want) {
		t.Errorf("status screen of a running move lacks %q:\n%s", want, b.String())
	}
	st.CitusWorker, st.CitusMove = "", nil
	b.Reset()
	if err := printRuntimeStatus(&b, st, now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Citus") || strings.Contains(b.String(), "Last move") {
		t.Errorf("a plain runtime's screen mentions Citus:\n%s", b.String())
	}
}

// TestAdmitsText: `databases <name>` says which namespaces the database
// admits (spec.allowedNamespaces): none, all, or those of a selector.
func TestAdmitsText(t *testing.T) {
	for _, c := range []struct {
		sel  *metav1.LabelSelector
		want string
	}{
		{nil, "no namespace (spec.allowedNamespaces is not set)"},
		{&metav1.LabelSelector{}, "every namespace"},
		{&metav1.LabelSelector{MatchLabels: map[string]string{"engram.dev/databases": "standard"}}, "namespaces labelled engram.dev/databases=standard"},
	} {
		if got := admitsText(c.sel); got != c.want {
			t.Errorf("admitsText(%v) = %q, want %q", c.sel, got, c.want)
		}
	}
}

// The status screen shows the embedder and the re-embed: its phase and
// counts while it runs, what it did once switched.
func TestStatusShowsReembed(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	started := metav1.NewTime(now.Add(-90 * time.Second))
	a := memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingBuiltin, Dimensions: 384}
	b := memoryv1alpha1.RuntimeEmbedder{Provider: memoryv1alpha1.EmbeddingOpenAI, Model: "m2", Dimensions: 384}
	st := &RuntimeStatus{Namespace: "team-a", Name: "bot", Ready: "False", Reason: memoryv1alpha1.ReasonReembedding, Embedding: &a,
		Reembed: &memoryv1alpha1.ReembedStatus{From: a, To: b, Phase: memoryv1alpha1.ReembedFilling, Filled: 1200, Left: 800, Runs: 1, StartedAt: &started}}
	var out strings.Builder
	if err := printRuntimeStatus(&out, st, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Embedder:       builtin (384 dimensions)\n",
		"Re-embed:       Filling, builtin (384 dimensions) → openai m2 (384 dimensions): 1200 rows filled, 800 left, started 90s ago\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status screen lacks %q:\n%s", want, out.String())
		}
	}
	done := metav1.NewTime(now.Add(-time.Minute))
	st.Embedding, st.Reembed.Phase, st.Reembed.Filled, st.Reembed.Left, st.Reembed.FinishedAt = &b, memoryv1alpha1.ReembedSwitched, 2000, 0, &done
	out.Reset()
	if err := printRuntimeStatus(&out, st, now); err != nil {
		t.Fatal(err)
	}
	if want := "Re-embed:       Switched, builtin (384 dimensions) → openai m2 (384 dimensions): 2000 rows re-embedded, 60s ago\n"; !strings.Contains(out.String(), want) {
		t.Errorf("status screen of a switched re-embed lacks %q:\n%s", want, out.String())
	}
}
