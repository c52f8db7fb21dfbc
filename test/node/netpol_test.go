package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/naming"
)

// enforcesNetworkPolicies: the node runs kube-router's policy controller;
// a user's cluster says so with ENGRAM_E2E_NETWORK_POLICY=enforced.
func (cl *cluster) enforcesNetworkPolicies() bool {
	return cl.ours || os.Getenv("ENGRAM_E2E_NETWORK_POLICY") == "enforced"
}

// testNetworkPolicy: the chart's NetworkPolicy (the operator's metrics
// port) and the operator's one for support-bot exist; where the network
// plugin enforces them (kube-router on the node), support-bot's API answers
// Pods of its own namespace only, and the metrics ports (the operator's and
// support-bot's) answer Pods of the monitoring namespace only: a Pod of
// another namespace, or an API client of the runtime's, gets no answer.
func (e *env) testNetworkPolicy(t *testing.T) {
	ctx := scenarioCtx(t, 5*time.Minute)
	e.ensureSamples(t)
	var np networkingv1.NetworkPolicy
	if err := e.cl.c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorDeployment}, &np); err != nil {
		t.Errorf("the chart's NetworkPolicy %s/%s: %v", operatorNamespace, operatorDeployment, err)
	}
	if err := e.cl.c.Get(ctx, client.ObjectKey{Namespace: e.samplesNS, Name: sampleRuntime}, &np); err != nil {
		t.Errorf("support-bot's NetworkPolicy: %v", err)
	}
	if !e.cl.enforcesNetworkPolicies() {
		t.Log("the cluster's network plugin is not known to enforce NetworkPolicies (ENGRAM_E2E_NETWORK_POLICY=enforced): objects checked, traffic not")
		return
	}
	s := e.service(t, e.samplesNS, sampleRuntime)
	operatorMetrics := e.podPortURL(t, ctx, operatorNamespace, operatorPods, "metrics", "/metrics")
	serviceMetrics := e.podPortURL(t, ctx, e.samplesNS, client.MatchingLabels(naming.SelectorLabels(sampleRuntime)), naming.MetricsPortName, "/metrics")
	readyz := "http://" + s.clusterIP + "/readyz"

	e.cl.createNamespace(t, e.monitoringNS)
	monitoring := e.toolbox(t, e.monitoringNS)
	outsider := e.toolbox(t, e.namespace(t, "outsider"))
	inside := e.toolbox(t, e.samplesNS)
	for _, c := range []struct {
		what  string
		from  *toolbox
		url   string
		admit bool
	}{
		{"support-bot's API from its own namespace", inside, readyz, true},
		{"support-bot's API from another namespace", outsider, readyz, false},
		{"support-bot's metrics from the monitoring namespace", monitoring, serviceMetrics, true},
		{"support-bot's metrics from its own namespace (an API client)", inside, serviceMetrics, false},
		{"support-bot's metrics from another namespace", outsider, serviceMetrics, false},
		{"the operator's metrics from the monitoring namespace", monitoring, operatorMetrics, true},
		{"the operator's metrics from another namespace", outsider, operatorMetrics, false},
	} {
		// Refusal shows as no answer: the policy drops (or rejects) the
		// connection. The admitted calls show that something listens.
		code, body, err := c.from.call(ctx, "-timeout", "3s", c.url)
		switch {
		case c.admit && (err != nil || code != 200):
			t.Errorf("%s: %d %s %v, want 200", c.what, code, body, err)
		case !c.admit && !errors.Is(err, errNoAnswer):
			t.Errorf("%s: %d %s %v, want no answer (refused by the NetworkPolicy)", c.what, code, body, err)
		default:
			t.Logf("%s: admitted %v as expected", c.what, c.admit)
		}
	}
}

// podPortURL is the URL of path at the named port of the first Pod of
// ns that sel selects: NetworkPolicies act on Pods, so the suite calls the
// Pod, not a Service.
func (e *env) podPortURL(t *testing.T, ctx context.Context, ns string, sel client.MatchingLabels, portName, path string) string {
	t.Helper()
	var pods corev1.PodList
	if err := e.cl.c.List(ctx, &pods, client.InNamespace(ns), sel); err != nil || len(pods.Items) == 0 {
		t.Fatalf("Pods of %s %v: %v (%d)", ns, sel, err, len(pods.Items))
	}
	p := pods.Items[0]
	for _, port := range p.Spec.Containers[0].Ports {
		if port.Name == portName {
			return fmt.Sprintf("http://%s%s", net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port.ContainerPort))), path)
		}
	}
	t.Fatalf("Pod %s/%s has no port named %s", ns, p.Name, portName)
	return ""
}
