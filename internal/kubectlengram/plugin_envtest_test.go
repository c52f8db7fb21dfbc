package kubectlengram

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/demo"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// cluster is the real stack of the plugin tests: kube-apiserver + etcd,
// the operator in-process, real PostgreSQL, and the local pod runner that
// runs the memory service and the jobs as `manager` processes.
type cluster struct {
	ns         string
	c          client.Client
	kubeconfig string // a system:masters user
	viewer     string // a user who may only get and list MemoryRuntimes in ns
	endpoint   func(ns, name string) string
	dbURL      string // admin URL of the test database
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	dbURL := testenv.NewDatabase(t)
	env, cfg := testenv.ControlPlane(t)
	binary := testenv.BuildManager(t)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := demo.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl := &cluster{ns: fmt.Sprintf("plugin-%d", time.Now().UnixNano()%1e6), c: c, dbURL: dbURL}
	if err := demo.Prepare(ctx, c, dbURL, "", cl.ns); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	opDone, err := demo.StartOperator(ctx, cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := demo.NewKubelet(cfg, binary, t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	kDone := make(chan error, 1)
	go func() { kDone <- kubelet.Run(ctx) }()
	cl.endpoint = kubelet.Endpoint
	t.Cleanup(func() {
		cancel()
		<-kDone
		<-opDone
		var list memoryv1alpha1.MemoryRuntimeList
		if err := c.List(context.Background(), &list, client.InNamespace(cl.ns)); err == nil {
			admin := testenv.NewPool(t, dbURL, 2)
			for _, rt := range list.Items {
				owner := tenant.Owner{UID: string(rt.UID), Namespace: rt.Namespace, Name: rt.Name}
				if _, err := tenant.Drop(context.Background(), admin, rt.Status.Schema, owner); err != nil && rt.Status.Schema != "" {
					t.Logf("dropping tenant %s: %v", rt.Status.Schema, err)
				}
			}
		}
	})
	cl.kubeconfig = writeKubeconfig(t, env, envtest.User{Name: "plugin-admin", Groups: []string{"system:masters"}})
	cl.viewer = writeKubeconfig(t, env, envtest.User{Name: "plugin-viewer"})
	cl.grantViewer(t)
	return cl
}

func writeKubeconfig(t *testing.T, env *envtest.Environment, u envtest.User) string {
	t.Helper()
	user, err := env.ControlPlane.AddUser(u, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), u.Name+".kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// grantViewer lets plugin-viewer get and list MemoryRuntimes, nothing else.
func (cl *cluster) grantViewer(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "engram-viewer", Namespace: cl.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{memoryv1alpha1.GroupVersion.Group}, Resources: []string{"memoryruntimes"}, Verbs: []string{"get", "list"}}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "engram-viewer", Namespace: cl.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "plugin-viewer"}}}
	for _, o := range []client.Object{role, rb} {
		if err := cl.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// run is one `kubectl engram` invocation as admin in the test namespace.
func (cl *cluster) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return cl.runAs(t, cl.kubeconfig, args...)
}

func (cl *cluster) runAs(t *testing.T, kubeconfig string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	all := append(args, "--kubeconfig", kubeconfig, "-n", cl.ns)
	code := Main(ctx, all, &out, &errOut)
	return out.String(), errOut.String(), code
}

// ok runs a command that must succeed.
func (cl *cluster) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := cl.run(t, args...)
	if code != 0 {
		t.Fatalf("kubectl engram %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// fails runs a command that must fail with a message containing want.
func (cl *cluster) fails(t *testing.T, kubeconfig string, want string, args ...string) {
	t.Helper()
	out, errOut, code := cl.runAs(t, kubeconfig, args...)
	if code == 0 || !strings.Contains(errOut, want) {
		t.Errorf("kubectl engram %s: exit %d, stderr %q; want a failure mentioning %q (stdout %q)", strings.Join(args, " "), code, errOut, want, out)
	}
}

func (cl *cluster) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.EventuallyTrue(t, what, 2*time.Minute, cond)
}

func (cl *cluster) runtime(t *testing.T, name string) *memoryv1alpha1.MemoryRuntime {
	t.Helper()
	var rt memoryv1alpha1.MemoryRuntime
	if err := cl.c.Get(context.Background(), client.ObjectKey{Namespace: cl.ns, Name: name}, &rt); err != nil {
		t.Fatal(err)
	}
	return &rt
}

// TestPlugin drives every command of kubectl engram against the real stack
// with the samples of config/samples applied.
func TestPlugin(t *testing.T) {
	cl := startCluster(t)
	ctx := context.Background()
	if _, err := demo.ApplySamples(ctx, cl.c, filepath.Join(testenv.RepoRoot(), "config", "samples"), cl.ns); err != nil {
		t.Fatal(err)
	}
	const rt = "support-bot"
	var url string
	cl.waitFor(t, "the runtime to be Ready and its service to run", func() bool {
		r := cl.runtime(t, rt)
		c := r.GetCondition(memoryv1alpha1.ConditionReady)
		url = cl.endpoint(cl.ns, naming.DeploymentName(rt))
		return c != nil && c.Status == metav1.ConditionTrue && url != ""
	})
	cl.waitFor(t, "the retention job to be scheduled", func() bool {
		var rj memoryv1alpha1.RetentionJob
		err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: "nightly"}, &rj)
		return err == nil && len(rj.Status.CronJobs) == 1 && rj.Status.NextScheduleTime != nil
	})

	t.Run("status table", func(t *testing.T) {
		out := cl.ok(t, "status")
		if !strings.Contains(out, "NAME") || !regexpLine(out, rt, "True") {
			t.Errorf("status table:\n%s", out)
		}
		var rows []RuntimeRow
		decodeJSON(t, cl.ok(t, "status", "-A", "-o", "json"), &rows)
		if len(rows) != 1 || rows[0].Name != rt || rows[0].Namespace != cl.ns || rows[0].SchemaVersion == 0 {
			t.Errorf("status -A -o json = %+v", rows)
		}
	})

	t.Run("memories, context and erase through --url", func(t *testing.T) {
		token := adminTokenOf(t, cl, rt)
		api := &demo.API{Base: url, Token: token}
		for _, body := range []map[string]any{
			{"content": "Alice prefers dark mode in every editor", "category": "preference"},
			{"content": "Alice works on the payments team at Acme", "category": "project"},
			{"content": "Alice is travelling to Lisbon next week", "category": "contextual", "tags": []string{"travel"}},
		} {
			if err := api.Do(ctx, "POST", "/v1/owners/alice/memories", body, nil); err != nil {
				t.Fatal(err)
			}
		}
		out := cl.ok(t, "memories", rt, "alice", "--url", url)
		if !strings.Contains(out, "CONTENT") || !strings.Contains(out, "Lisbon") || !strings.Contains(out, "payments") {
			t.Errorf("memories:\n%s", out)
		}
		var rows []MemoryRow
		decodeJSON(t, cl.ok(t, "memories", rt, "alice", "--url", url, "--search", "editor theme dark mode", "--limit", "2", "-o", "json"), &rows)
		if len(rows) == 0 || len(rows) > 2 || !strings.Contains(rows[0].Content, "dark mode") || rows[0].Score == nil {
			t.Errorf("memories --search -o json = %+v", rows)
		}
		out = cl.ok(t, "context", rt, "alice", "--url", url, "--query", "where is alice going")
		if !strings.Contains(out, "Lisbon") || !strings.Contains(out, "tokens") {
			t.Errorf("context:\n%s", out)
		}
		travel := `{"tags": {"eq": "travel"}}`
		for _, args := range [][]string{{}, {"--search", "editor theme dark mode"}} {
			rows = nil
			decodeJSON(t, cl.ok(t, append([]string{"memories", rt, "alice", "--url", url, "--filter", travel, "-o", "json"}, args...)...), &rows)
			if len(rows) != 1 || !strings.Contains(rows[0].Content, "Lisbon") {
				t.Errorf("memories --filter %s %v = %+v, want the Lisbon memory only", travel, args, rows)
			}
		}
		out = cl.ok(t, "context", rt, "alice", "--url", url, "--query", "what does alice prefer", "--filter", travel)
		if !strings.Contains(out, "Lisbon") || strings.Contains(out, "dark mode") || strings.Contains(out, "payments") {
			t.Errorf("context --filter:\n%s", out)
		}
		cl.fails(t, cl.kubeconfig, "not a JSON object", "memories", rt, "alice", "--url", url, "--filter", "tags=travel")
		cl.fails(t, cl.kubeconfig, `unknown field "like"`, "memories", rt, "alice", "--url", url, "--filter", `{"tags": {"like": "tr%"}}`)
		var st RuntimeStatus
		decodeJSON(t, cl.ok(t, "status", rt, "--url", url, "-o", "json"), &st)
		if st.Memories == nil || st.Memories.Active != 3 || st.Memories.Owners != 1 {
			t.Errorf("status memories = %+v (unavailable %v)", st.Memories, st.Unavailable)
		}
		cl.fails(t, cl.kubeconfig, "--yes", "erase", rt, "alice", "--url", url)
		out = cl.ok(t, "erase", rt, "alice", "--url", url, "--yes")
		if !strings.Contains(out, "3 memories") {
			t.Errorf("erase:\n%s", out)
		}
		// --url with --service-token needs no cluster at all.
		out, errOut, code := Main2(ctx, "memories", rt, "alice", "--url", url, "--service-token", token, "--kubeconfig", "/nonexistent")
		if code != 0 || !strings.Contains(out, "No memories") {
			t.Errorf("memories with --service-token: exit %d, %q, %q", code, out, errOut)
		}
	})

	t.Run("run-now --wait", func(t *testing.T) {
		out := cl.ok(t, "run-now", "nightly", "--dry-run")
		if !strings.Contains(out, "dry run") {
			t.Errorf("run-now --dry-run:\n%s", out)
		}
		var rj memoryv1alpha1.RetentionJob
		if err := cl.c.Get(ctx, client.ObjectKey{Namespace: cl.ns, Name: "nightly"}, &rj); err != nil || rj.Annotations[naming.AnnotationRunNow] != "" {
			t.Fatalf("--dry-run changed the RetentionJob: %v %v", err, rj.Annotations)
		}
		var res ActionResult
		decodeJSON(t, cl.ok(t, "run-now", "nightly", "--wait", "--timeout", "2m", "-o", "json"), &res)
		if len(res.Runs) != 1 || res.Runs[0].Result != "Succeeded" || res.Runs[0].Runtime != rt {
			t.Fatalf("run-now --wait = %+v", res)
		}
		if res.LastRun == nil || res.LastRun.JobName != res.Runs[0].Job || len(res.LastRun.Operations) != 4 {
			t.Fatalf("run-now --wait lastRun = %+v", res.LastRun)
		}
		out = cl.ok(t, "status", rt, "--url", url)
		for _, want := range []string{"Ready:", "True (Available)", "migration version", "standard (generation", "Credentials:", "nightly", "next run:", "last run:  Succeeded", "compact", "scanned", "Memories:", "DatabaseReady", "ServiceAvailable"} {
			if !strings.Contains(out, want) {
				t.Errorf("status lacks %q:\n%s", want, out)
			}
		}
	})

	// The operator's status metrics (internal/controller/metrics_status.go)
	// describe what the plugin just showed: checked here, where a real run finished.
	t.Run("operator status metrics", func(t *testing.T) {
		families, err := metrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				key := f.GetName()
				for _, l := range m.GetLabel() {
					if l.GetName() == "namespace" && l.GetValue() != cl.ns {
						key = ""
						break
					}
					if l.GetName() == "operation" || l.GetName() == "runtime" && !strings.HasPrefix(f.GetName(), "engram_memoryruntime") {
						key += "/" + l.GetValue()
					}
				}
				if key != "" && m.GetGauge() != nil {
					got[key] = m.GetGauge().GetValue()
				}
			}
		}
		now := float64(time.Now().Unix())
		checks := []struct {
			key string
			ok  func(float64) bool
		}{
			{"engram_memoryruntime_ready", func(v float64) bool { return v == 1 }},
			{"engram_memoryruntime_credentials_last_written_timestamp_seconds", func(v float64) bool { return now-v < 600 && v <= now }},
			{"engram_retentionjob_schedule_interval_seconds", func(v float64) bool { return v == 86400 }},
			{"engram_retentionjob_last_success_timestamp_seconds", func(v float64) bool { return now-v < 600 }},
			{"engram_retentionjob_last_run_failed/" + rt, func(v float64) bool { return v == 0 }},
			{"engram_retentionjob_last_run_duration_seconds/" + rt, func(v float64) bool { return v >= 0 && v < 600 }},
			{"engram_retentionjob_last_run_affected_rows/compact/" + rt, func(v float64) bool { return v >= 0 }},
		}
		for _, c := range checks {
			v, ok := got[c.key]
			if !ok || !c.ok(v) {
				t.Errorf("%s = %v (present %v)", c.key, v, ok)
			}
		}
	})

	t.Run("rotate-credentials --wait, pause, resume", func(t *testing.T) {
		before := cl.runtime(t, rt).Status.RotatedCredentials
		out := cl.ok(t, "rotate-credentials", rt, "--wait", "--timeout", "2m")
		after := cl.runtime(t, rt).Status.RotatedCredentials
		if !strings.Contains(out, "rotated") || after == before || after == "" {
			t.Errorf("rotate-credentials: %q, rotatedCredentials %q -> %q", out, before, after)
		}
		cl.ok(t, "pause", rt)
		cl.waitFor(t, "condition Paused=True", func() bool {
			c := cl.runtime(t, rt).GetCondition(memoryv1alpha1.ConditionPaused)
			return c != nil && c.Status == metav1.ConditionTrue
		})
		var st RuntimeStatus
		decodeYAML(t, cl.ok(t, "status", rt, "-o", "yaml"), &st)
		if !st.Paused {
			t.Errorf("status -o yaml after pause: %+v", st)
		}
		cl.ok(t, "resume", rt)
		if cl.runtime(t, rt).Spec.Paused {
			t.Error("resume left spec.paused true")
		}
	})

	t.Run("databases", cl.testDatabases)

	t.Run("clear errors", func(t *testing.T) {
		cl.fails(t, cl.kubeconfig, `no memoryruntimes.memory.engram.dev "nope" in namespace "`+cl.ns+`"`, "status", "nope")
		cl.fails(t, cl.kubeconfig, `no retentionjobs.memory.engram.dev "nope"`, "run-now", "nope")
		cl.fails(t, cl.viewer, `forbidden: your RBAC lacks verb "get" on resource "secrets"`, "memories", rt, "alice")
		cl.fails(t, cl.viewer, `forbidden: your RBAC lacks verb "patch" on resource "memoryruntimes.memory.engram.dev"`, "pause", rt)
		cl.fails(t, cl.viewer, `forbidden: your RBAC lacks verb "list" on resource "memoryruntimes.memory.engram.dev" in namespace ""`, "status", "-A")
		out, _, code := cl.runAs(t, cl.viewer, "status", rt)
		if code != 0 || !strings.Contains(out, "Not shown:") || !strings.Contains(out, `lacks verb "get" on resource "deployments.apps"`) {
			t.Errorf("status as viewer: exit %d\n%s", code, out)
		}
		cl.fails(t, cl.kubeconfig, "--limit 0", "memories", rt, "alice", "--limit", "0")
		cl.fails(t, cl.kubeconfig, `--output "xml"`, "status", "-o", "xml")
		cl.fails(t, cl.kubeconfig, "takes RUNTIME OWNER", "memories", rt)

		// A runtime that is not Ready names the reason.
		bad := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: cl.ns},
			Spec: memoryv1alpha1.MemoryRuntimeSpec{Database: memoryv1alpha1.DatabaseSpec{ClusterConnection: "missing"}}}
		if err := cl.c.Create(ctx, bad); err != nil {
			t.Fatal(err)
		}
		cl.waitFor(t, "the broken runtime to report", func() bool { return cl.runtime(t, "broken").GetCondition(memoryv1alpha1.ConditionReady) != nil })
		reason := cl.runtime(t, "broken").GetCondition(memoryv1alpha1.ConditionReady).Reason
		cl.fails(t, cl.kubeconfig, "memoryruntime "+cl.ns+"/broken is not Ready yet: "+reason, "context", "broken", "alice", "--query", "x")
		if err := cl.c.Delete(ctx, bad); err != nil {
			t.Fatal(err)
		}

		// Through the service proxy: envtest has no pod network, so the API
		// server cannot reach the local process; the error says it came
		// from the way through the API server.
		_, errOut, code := cl.run(t, "memories", rt, "alice")
		if code == 0 || !strings.Contains(errOut, "service proxy could not reach service "+cl.ns+"/"+rt+" (503): no endpoints available") {
			t.Errorf("memories through the proxy in envtest: exit %d, %q", code, errOut)
		}
	})
}

// Main2 runs the plugin without the cluster flags of runAs.
func Main2(ctx context.Context, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := Main(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func adminTokenOf(t *testing.T, cl *cluster, rt string) string {
	t.Helper()
	var s corev1.Secret
	if err := cl.c.Get(context.Background(), client.ObjectKey{Namespace: cl.ns, Name: naming.APITokenSecretName(rt)}, &s); err != nil {
		t.Fatal(err)
	}
	tok := auth.TokenWithRole(s.Data[naming.KeyTokens], auth.RoleAdmin)
	if tok == "" {
		t.Fatal("no admin token in the API token Secret")
	}
	return tok
}

func decodeJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decoding %s: %v", s, err)
	}
}

func decodeYAML(t *testing.T, s string, v any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decoding %s: %v", s, err)
	}
}

// regexpLine reports whether one line of out holds every word.
func regexpLine(out string, words ...string) bool {
	for _, l := range strings.Split(out, "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			return true
		}
	}
	return false
}
