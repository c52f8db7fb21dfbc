package node

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/demo"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// sampleRuntime is the MemoryRuntime of config/samples.
const sampleRuntime = "support-bot"

// testSamples: config/samples become Ready with the memory service as two
// real Pods whose readiness comes from the real probe, running the image
// as uid 65532 on a read-only root filesystem with the token Secret
// mounted; REST and MCP answer through the Service, from the host at the
// ClusterIP and from a Pod.
func (e *env) testSamples(t *testing.T) {
	ctx := scenarioCtx(t, 8*time.Minute)
	ns := e.samplesNS
	start := time.Now()
	rt := e.ensureSamples(t)
	t.Logf("%s Ready in %s: %s", sampleRuntime, time.Since(start).Round(100*time.Millisecond), rt.Status.Endpoint)

	// Ready needs one replica serving; the sample asks for two.
	e.waitAvailable(t, ns, sampleRuntime, 2)
	pods := e.servicePods(t, ns, sampleRuntime)
	if len(pods) != 2 {
		t.Fatalf("%d service Pods, want the sample's 2 replicas", len(pods))
	}
	for _, p := range pods {
		if !podReady(&p) || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("Pod %s: Ready %v, restarts %d", p.Name, podReady(&p), p.Status.ContainerStatuses[0].RestartCount)
		}
		if e.cl.ours {
			e.checkProcess(t, &p)
		}
	}

	s := e.service(t, ns, sampleRuntime)
	got, err := s.add(ctx, "alice", "Alice reads the memory service through its ClusterIP")
	if err != nil {
		t.Fatalf("REST through the Service (%s): %v", s.base, err)
	}
	var hits struct {
		Results []struct {
			Memory struct{ ID string } `json:"memory"`
		} `json:"results"`
	}
	if err := s.do(ctx, http.MethodPost, "/v1/owners/alice/search", map[string]any{"query": "ClusterIP"}, &hits); err != nil || len(hits.Results) == 0 || hits.Results[0].Memory.ID != got.Memory.ID {
		t.Errorf("search through the Service: %v, %+v (want %s first)", err, hits, got.Memory.ID)
	}
	e.checkMCP(t, ctx, s)

	// From a Pod of the namespace (the NetworkPolicy admits its own namespace).
	tb := e.toolbox(t, ns)
	code, body, err := tb.call(ctx, "-X", "POST", "-H", "Authorization: Bearer "+s.token,
		"-d", `{"content":"Bob writes from inside the cluster","category":"contextual"}`,
		"http://"+s.clusterIP+"/v1/owners/bob/memories")
	if err != nil || code != http.StatusCreated && code != http.StatusOK {
		t.Errorf("REST from a Pod: %d %s %v", code, body, err)
	}
	code, body, err = tb.call(ctx, "-X", "POST", "-H", "Authorization: Bearer "+s.token,
		"-H", "Accept: application/json, text/event-stream",
		"-d", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_memories","arguments":{"owner":"bob"}}}`,
		"http://"+s.clusterIP+"/mcp")
	if err != nil || code != http.StatusOK || !strings.Contains(body, "inside the cluster") {
		t.Errorf("MCP tools/call from a Pod: %d %s %v", code, body, err)
	}
}

// ensureSamples applies config/samples into the samples namespace (again:
// server-side apply changes nothing the second time) and waits until
// support-bot is Ready, so each scenario that uses them also runs alone.
func (e *env) ensureSamples(t *testing.T) *memoryv1alpha1.MemoryRuntime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	applied, err := demo.ApplySamples(ctx, e.cl.c, filepath.Join(testenv.RepoRoot(), "config", "samples"), e.samplesNS)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("applied %v in %s", applied, e.samplesNS)
	return e.waitReady(t, e.samplesNS, sampleRuntime)
}

// checkMCP: the official SDK's client lists the tools and calls
// search_memory through the Service.
func (e *env) checkMCP(t *testing.T, ctx context.Context, s *svc) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "engram-node-suite", Version: "v0"}, nil)
	session, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: s.base + "/mcp", HTTPClient: &http.Client{Transport: s.transport(), Timeout: 10 * time.Second}, MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Errorf("MCP through the Service: %v", err)
		return
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "search_memory", Arguments: map[string]any{"owner": "alice", "query": "ClusterIP"}})
	if err != nil || res.IsError || !strings.Contains(mcpText(res), "ClusterIP") {
		t.Errorf("MCP search_memory through the Service: %v %+v", err, res)
	}
}

// mcpText is what a tool result says, as text.
func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	fmt.Fprint(&b, res.StructuredContent)
	return b.String()
}

// waitReady waits until the runtime is Ready for its generation and
// remembers its tenant for the final cleanup.
func (e *env) waitReady(t *testing.T, ns, name string) *memoryv1alpha1.MemoryRuntime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rt := &memoryv1alpha1.MemoryRuntime{}
	err := poll(ctx, 500*time.Millisecond, func() (bool, error) {
		if err := e.cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rt); err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(rt.Status.Conditions, memoryv1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == rt.Generation, nil
	})
	if rt.Status.Schema != "" {
		e.tenants.add(rt)
	}
	if err != nil {
		t.Fatalf("%s/%s not Ready: %v\nconditions: %+v\n%s", ns, name, err, rt.Status.Conditions, e.cl.describePods(ns))
	}
	return rt
}

// waitAvailable waits until the runtime's Deployment has n available
// replicas (the kubelet's readiness probes passed) and no other.
func (e *env) waitAvailable(t *testing.T, ns, name string, n int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var d *appsv1.Deployment
	err := poll(ctx, 500*time.Millisecond, func() (bool, error) {
		var err error
		d, err = e.deployment(ctx, ns, name)
		return err == nil && d.Status.AvailableReplicas == n && d.Status.Replicas == n, err
	})
	if err != nil {
		t.Fatalf("%s/%s: not %d available replicas: %v (status %+v)\n%s", ns, name, n, err, d.Status, e.cl.describePods(ns))
	}
}

// servicePods are the runtime's memory service Pods that are not terminating.
func (e *env) servicePods(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var list corev1.PodList
	if err := e.cl.c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(naming.SelectorLabels(name))); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// deployment reads the runtime's Deployment.
func (e *env) deployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	var d appsv1.Deployment
	err := e.cl.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.DeploymentName(name)}, &d)
	return &d, err
}
