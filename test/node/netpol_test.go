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
)

// enforcesNetworkPolicies: the node runs kube-router's policy controller;
// a user's cluster says so with ENGRAM_E2E_NETWORK_POLICY=enforced.
func (cl *cluster) enforcesNetworkPolicies() bool {
	return cl.ours || os.Getenv("ENGRAM_E2E_NETWORK_POLICY") == "enforced"
}

// testNetworkPolicy: the chart's NetworkPolicy (the operator's metrics
// port) and the operator's one for support-bot exist; where the network
// plugin enforces them (kube-router on the node), a Pod of another
// namespace gets no answer from either, while Pods the policies admit do.
func (e *env) testNetworkPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
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
	metrics := e.operatorMetricsURL(t, ctx)
	readyz := "http://" + s.clusterIP + "/readyz"

	outsider := e.toolbox(t, e.namespace(t, "outsider"))
	inside := e.toolbox(t, e.samplesNS)
	operatorNS := e.toolbox(t, operatorNamespace)
	for _, c := range []struct {
		what  string
		from  *toolbox
		url   string
		admit bool
	}{
		{"support-bot from its own namespace", inside, readyz, true},
		{"support-bot from another namespace", outsider, readyz, false},
		{"the operator's metrics from its own namespace", operatorNS, metrics, true},
		{"the operator's metrics from another namespace", outsider, metrics, false},
	} {
		// Refusal shows as no answer: the policy drops the packets.
		code, body, err := c.from.call(ctx, "-timeout", "3s", c.url)
		switch {
		case c.admit && (err != nil || code != 200):
			t.Errorf("%s: %d %s %v, want 200", c.what, code, body, err)
		case !c.admit && !errors.Is(err, errNoAnswer):
			t.Errorf("%s: %d %s %v, want no answer (dropped by the NetworkPolicy)", c.what, code, body, err)
		default:
			t.Logf("%s: admitted %v as expected", c.what, c.admit)
		}
	}
}

// operatorMetricsURL is the metrics endpoint of the operator's Pod.
func (e *env) operatorMetricsURL(t *testing.T, ctx context.Context) string {
	t.Helper()
	var pods corev1.PodList
	if err := e.cl.c.List(ctx, &pods, client.InNamespace(operatorNamespace), operatorPods); err != nil || len(pods.Items) == 0 {
		t.Fatalf("operator Pods: %v (%d)", err, len(pods.Items))
	}
	p := pods.Items[0]
	for _, port := range p.Spec.Containers[0].Ports {
		if port.Name == "metrics" {
			return fmt.Sprintf("http://%s/metrics", net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port.ContainerPort))))
		}
	}
	t.Fatalf("the operator Pod has no port named metrics")
	return ""
}
