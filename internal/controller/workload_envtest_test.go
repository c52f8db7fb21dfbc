package controller

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// scenarioScheduling: a runtime's scheduling fields reach its Deployment and
// the CronJob of its RetentionJob as the API server stores them (so the
// objects are valid, and re-applying them writes nothing: the idle check
// covers them); the CronJob has a starting deadline; the runtime's
// NetworkPolicy selects the job pods; a spec change of the knobs reaches
// the CronJob too.
func scenarioScheduling(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "placed")
	rt := e.readyRuntime(t, withPlacement(newRuntime(ns, "bot", "")))

	var d appsv1.Deployment
	if err := e.get(t, ns, "bot", &d); err != nil {
		t.Fatal(err)
	}
	ps := d.Spec.Template.Spec
	if ps.NodeSelector["pool"] != "memory" || ps.PriorityClassName != "tenant-high" || len(ps.Tolerations) != 1 ||
		ps.Affinity == nil || ps.Affinity.NodeAffinity == nil || ps.Affinity.PodAntiAffinity == nil ||
		len(ps.TopologySpreadConstraints) != 1 || ps.TopologySpreadConstraints[0].LabelSelector == nil {
		t.Errorf("the Deployment's pod spec lacks scheduling fields: %+v", ps)
	}
	res := ps.Containers[0].Resources
	if res.Requests.StorageEphemeral().IsZero() || res.Limits.StorageEphemeral().IsZero() {
		t.Errorf("resources %+v: no ephemeral storage", res)
	}

	rj := newRetentionJob(ns, "nightly", "bot", "*/15 * * * *", "decay")
	mustCreate(t, e.c, rj)
	var cj batchv1.CronJob
	eventually(t, "the CronJob exists", 20*time.Second, func() error { return e.get(t, ns, "nightly-bot", &cj) })
	if d := cj.Spec.StartingDeadlineSeconds; d == nil || *d != 900 {
		t.Errorf("startingDeadlineSeconds = %v, want 900 (the schedule's interval)", d)
	}
	jps := cj.Spec.JobTemplate.Spec.Template.Spec
	if jps.NodeSelector["pool"] != "memory" || jps.PriorityClassName != "tenant-high" || len(jps.Tolerations) != 1 ||
		jps.Affinity == nil || jps.Affinity.NodeAffinity == nil || jps.Affinity.PodAntiAffinity != nil {
		t.Errorf("the job pod spec = %+v, want the runtime's node selector, tolerations, priority and node affinity", jps)
	}
	var np networkingv1.NetworkPolicy
	if err := e.get(t, ns, "bot", &np); err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || !sel.Matches(labels.Set(cj.Spec.JobTemplate.Spec.Template.Labels)) || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the NetworkPolicy's selector %v (%v) does not select the job and service pods", np.Spec.PodSelector, err)
	}

	// The runtime's knobs change: its CronJob follows.
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) {
		r.Spec.Service.NodeSelector = map[string]string{"pool": "batch"}
	})
	eventually(t, "the CronJob follows the runtime's node selector", 20*time.Second, func() error {
		if err := e.get(t, ns, "nightly-bot", &cj); err != nil {
			return err
		}
		if got := cj.Spec.JobTemplate.Spec.Template.Spec.NodeSelector; !reflect.DeepEqual(got, map[string]string{"pool": "batch"}) {
			return fmt.Errorf("nodeSelector %v", got)
		}
		return nil
	})
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)

	// podAntiAffinity: {} turns the default spread off, and the applied
	// Deployment then stays as it is (no apply loop over an empty object).
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) {
		r.Spec.Service.Affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
	})
	eventually(t, "the default anti-affinity is gone", 20*time.Second, func() error {
		if err := e.get(t, ns, "bot", &d); err != nil {
			return err
		}
		if a := d.Spec.Template.Spec.Affinity; a == nil || a.NodeAffinity == nil || (a.PodAntiAffinity != nil && len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) > 0) {
			return fmt.Errorf("affinity %+v", a)
		}
		return nil
	})
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	e.settle(t, ns)
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { metav1.SetMetaDataLabel(&r.ObjectMeta, "touched", "1") })
	e.noWritesIn(t, ns, 3*time.Second)
}

// scenarioPodDisruptionBudget: a runtime of more than one replica gets a
// PodDisruptionBudget (maxUnavailable 1); scaling to one replica, or
// turning it off, deletes the operator's own; someone else's of that name
// is left alone while not wanted and refused (ObjectNotOwned) when wanted.
func scenarioPodDisruptionBudget(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "pdb")
	ctx := testContext(t)
	rt := newRuntime(ns, "bot", "")
	rt.Spec.Service.Replicas = ptr.To[int32](2)
	rt = e.readyRuntime(t, rt)

	var pdb policyv1.PodDisruptionBudget
	eventually(t, "the PodDisruptionBudget exists", 20*time.Second, func() error { return e.get(t, ns, "bot", &pdb) })
	if !metav1.IsControlledBy(&pdb, rt) || pdb.Labels[naming.LabelManagedBy] != naming.ManagedBy ||
		pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil ||
		!reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, naming.SelectorLabels("bot")) ||
		pdb.Spec.UnhealthyPodEvictionPolicy == nil || *pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
		t.Errorf("PodDisruptionBudget = %+v", pdb)
	}
	gone := func(what string) {
		t.Helper()
		eventually(t, what, 20*time.Second, func() error {
			err := e.get(t, ns, "bot", &policyv1.PodDisruptionBudget{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there (%v)", err)
		})
	}

	// One replica: the budget could only block a drain, so it goes.
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Service.Replicas = ptr.To[int32](1) })
	gone("the PodDisruptionBudget is deleted at one replica")
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)

	// Three replicas: back; turned off: gone again.
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Service.Replicas = ptr.To[int32](3) })
	eventually(t, "the PodDisruptionBudget is back at three replicas", 20*time.Second, func() error { return e.get(t, ns, "bot", &pdb) })
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) {
		r.Spec.Service.PodDisruptionBudget = &memoryv1alpha1.ServicePodDisruptionBudget{Enabled: ptr.To(false)}
	})
	gone("the PodDisruptionBudget is deleted when turned off")
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)

	// Someone else's budget of that name: left alone while off ...
	theirs := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}},
		},
	}
	mustCreate(t, e.c, theirs)
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { metav1.SetMetaDataLabel(&r.ObjectMeta, "touched", "1") })
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	e.unchanged(t, theirs, &policyv1.PodDisruptionBudget{})

	// ... and refused, not overwritten, when the runtime wants its own.
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Service.PodDisruptionBudget.Enabled = ptr.To(true) })
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonObjectNotOwned)
	if err := containsAll(got.GetCondition(memoryv1alpha1.ConditionReady).Message, "PodDisruptionBudget "+ns+"/bot", "not created by Engram"); err != nil {
		t.Error(err)
	}
	e.unchanged(t, theirs, &policyv1.PodDisruptionBudget{})
	if err := e.c.Delete(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the runtime's own PodDisruptionBudget replaces it", 20*time.Second, func() error {
		if err := e.get(t, ns, "bot", &pdb); err != nil {
			return err
		}
		if !metav1.IsControlledBy(&pdb, got) {
			return errors.New("not the runtime's")
		}
		return nil
	})
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
}

// scenarioServiceTLS: spec.service.tls naming a Secret that is missing or
// unusable stops the rollout with a clear condition (the running pods are
// left as they are: no crash loop); a valid kubernetes.io/tls Secret rolls
// out pods that mount it, serve HTTPS and are probed over HTTPS, and
// status.endpoint becomes https.
func scenarioServiceTLS(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "tls")
	ctx := testContext(t)
	rt := e.readyRuntime(t, newRuntime(ns, "bot", ""))
	if rt.Status.Endpoint != "http://bot."+ns+".svc:8080" {
		t.Fatalf("endpoint = %s", rt.Status.Endpoint)
	}
	plainGen := e.deploymentGeneration(t, ns, "bot")

	// The Secret does not exist yet (cert-manager has not issued it).
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) {
		r.Spec.Service.TLS = &memoryv1alpha1.ServiceTLS{SecretName: "bot-tls"}
	})
	got := e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonSecretNotFound)
	if err := containsAll(got.GetCondition(memoryv1alpha1.ConditionReady).Message, "spec.service.tls.secretName", `"bot-tls" does not exist`); err != nil {
		t.Error(err)
	}
	if gen := e.deploymentGeneration(t, ns, "bot"); got.Status.Endpoint != "http://bot."+ns+".svc:8080" || gen != plainGen {
		t.Errorf("endpoint %s, Deployment generation %d -> %d: the service must stay as it was", got.Status.Endpoint, plainGen, gen)
	}

	// A kubernetes.io/tls Secret whose key does not belong to the certificate.
	ca := testenv.NewTestCA(t)
	crt, key := ca.ServerCert(t, time.Now().Add(24*time.Hour), "bot."+ns+".svc", "bot")
	_, otherKey := ca.ServerCert(t, time.Now().Add(24*time.Hour), "bot."+ns+".svc")
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bot-tls", Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: otherKey}}
	mustCreate(t, e.c, sec)
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonTLSSecretInvalid)
	if err := containsAll(got.GetCondition(memoryv1alpha1.ConditionReady).Message, `Secret "bot-tls"`, "private key does not match public key"); err != nil {
		t.Error(err)
	}
	if c := got.GetCondition(memoryv1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Stalled = %+v, want True: a human has to fix the Secret", c)
	}
	if gen := e.deploymentGeneration(t, ns, "bot"); gen != plainGen {
		t.Errorf("the Deployment changed (generation %d -> %d) while the TLS Secret is unusable", plainGen, gen)
	}

	// Fixed: the pods mount it and speak HTTPS; the endpoint is https.
	update(t, e, sec, func(s *corev1.Secret) { s.Data[corev1.TLSPrivateKeyKey] = key })
	var d appsv1.Deployment
	eventually(t, "the Deployment serves TLS", 20*time.Second, func() error {
		if err := e.get(t, ns, "bot", &d); err != nil {
			return err
		}
		c := d.Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Command, "--tls-cert-file="+naming.TLSCertPath) || c.ReadinessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			return fmt.Errorf("command %v, readiness %+v", c.Command, c.ReadinessProbe.HTTPGet)
		}
		return nil
	})
	mounted := slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == "bot-tls" && v.Secret.DefaultMode != nil && *v.Secret.DefaultMode == 0o440
	})
	if !mounted {
		t.Errorf("volumes = %+v, want the Secret bot-tls mounted (mode 0440)", d.Spec.Template.Spec.Volumes)
	}
	e.markAvailable(t, ns, "bot")
	got = e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	if got.Status.Endpoint != "https://bot."+ns+".svc:8080" || !strings.Contains(got.GetCondition(memoryv1alpha1.ConditionReady).Message, "https://") {
		t.Errorf("endpoint %s, Ready %q: want https", got.Status.Endpoint, got.GetCondition(memoryv1alpha1.ConditionReady).Message)
	}
	var svc corev1.Service
	if err := e.get(t, ns, "bot", &svc); err != nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "https" {
		t.Errorf("Service ports %+v (%v), want one port named https", svc.Spec.Ports, err)
	}

	// A renewed certificate (cert-manager rewrites the Secret) rolls
	// nothing: the service reloads it.
	e.settle(t, ns)
	tlsGen := e.deploymentGeneration(t, ns, "bot")
	crt2, key2 := ca.ServerCert(t, time.Now().Add(48*time.Hour), "bot."+ns+".svc")
	update(t, e, sec, func(s *corev1.Secret) { s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey] = crt2, key2 })
	e.noWritesIn(t, ns, 3*time.Second)
	if gen := e.deploymentGeneration(t, ns, "bot"); gen != tlsGen {
		t.Errorf("a renewed certificate changed the Deployment (generation %d -> %d)", tlsGen, gen)
	}

	// TLS off: plain HTTP again.
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Service.TLS = nil })
	e.markAvailable(t, ns, "bot")
	eventually(t, "the endpoint is http again", 20*time.Second, func() error {
		var cur memoryv1alpha1.MemoryRuntime
		if err := e.get(t, ns, "bot", &cur); err != nil {
			return err
		}
		if cur.Status.Endpoint != "http://bot."+ns+".svc:8080" {
			return fmt.Errorf("endpoint %s", cur.Status.Endpoint)
		}
		return nil
	})
	if err := e.c.Delete(ctx, sec); err != nil {
		t.Fatal(err)
	}
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
}

// scenarioWorkloadCEL: the new fields refuse bad input with the API server's
// messages.
func scenarioWorkloadCEL(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "wlcel")
	ctx := testContext(t)
	rt := func(mutate func(*memoryv1alpha1.ServiceSpec)) client.Object {
		s := validRuntimeSpec()
		mutate(&s.Service)
		return &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: ns}, Spec: s}
	}
	rj := func(mutate func(*memoryv1alpha1.RetentionJobSpec)) client.Object {
		s := validRetentionSpec()
		mutate(&s)
		return &memoryv1alpha1.RetentionJob{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: ns}, Spec: s}
	}
	for _, c := range []celCase{
		{"priority class with capitals", rt(func(s *memoryv1alpha1.ServiceSpec) { s.PriorityClassName = "High" }),
			`spec.service.priorityClassName: Invalid value: "High": spec.service.priorityClassName in body should match`},
		{"TLS Secret without a name", rt(func(s *memoryv1alpha1.ServiceSpec) { s.TLS = &memoryv1alpha1.ServiceTLS{} }),
			`spec.service.tls.secretName: Invalid value: "": spec.service.tls.secretName in body should be at least 1 chars long`},
		{"TLS Secret name with a slash", rt(func(s *memoryv1alpha1.ServiceSpec) { s.TLS = &memoryv1alpha1.ServiceTLS{SecretName: "ns/bot-tls"} }),
			`spec.service.tls.secretName: Invalid value: "ns/bot-tls": spec.service.tls.secretName in body should match`},
		{"33 tolerations", rt(func(s *memoryv1alpha1.ServiceSpec) {
			for i := range 33 {
				s.Tolerations = append(s.Tolerations, corev1.Toleration{Key: fmt.Sprintf("k%d", i), Operator: corev1.TolerationOpExists})
			}
		}), "spec.service.tolerations: Too many: 33: must have at most 32 items"},
		{"starting deadline of 5 s", rj(func(s *memoryv1alpha1.RetentionJobSpec) { s.StartingDeadlineSeconds = ptr.To[int64](5) }),
			"spec.startingDeadlineSeconds: Invalid value: 5: spec.startingDeadlineSeconds in body should be greater than or equal to 10"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := e.c.Create(ctx, c.obj, client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("refused with %v\nwant a message containing %q", err, c.want)
			}
		})
	}
	valid := rt(func(s *memoryv1alpha1.ServiceSpec) {
		s.PriorityClassName = "system-cluster-critical"
		s.TLS = &memoryv1alpha1.ServiceTLS{SecretName: "bot-tls"}
		s.PodDisruptionBudget = &memoryv1alpha1.ServicePodDisruptionBudget{Enabled: ptr.To(false)}
		s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
	})
	if err := e.c.Create(ctx, valid, client.DryRunAll); err != nil {
		t.Errorf("a valid runtime was refused: %v", err)
	}
}

func (e *operatorEnv) deploymentGeneration(t *testing.T, ns, name string) int64 {
	t.Helper()
	var d appsv1.Deployment
	if err := e.get(t, ns, name, &d); err != nil {
		t.Fatal(err)
	}
	return d.Generation
}
