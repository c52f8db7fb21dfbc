package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// scenarioForeignObjects: an object Engram did not create that has the name of
// one of a runtime's objects is never overwritten — not when it lacks
// Engram's label (a Service), not when it carries a forged label and owner
// reference (a Secret). The runtime reports Ready=False ObjectNotOwned with
// a Warning event, the database is left untouched, and once the object is
// gone the runtime is created as usual.
func scenarioForeignObjects(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "foreign")
	ctx := testContext(t)

	// A Service of someone else, unlabelled, with the name the runtime's Service would have.
	theirs := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: map[string]string{"app": "theirs"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "theirs"},
			Ports:    []corev1.ServicePort{{Name: "web", Port: 1234, TargetPort: intstr.FromInt32(1234)}},
		},
	}
	mustCreate(t, e.c, theirs)
	rt := newRuntime(ns, "web", "")
	e.createRuntime(t, rt)
	got := e.waitCondition(t, ns, "web", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonObjectNotOwned)
	if err := containsAll(got.GetCondition(memoryv1alpha1.ConditionReady).Message,
		"Service "+ns+"/web", "not created by Engram", "app.kubernetes.io/managed-by=engram-operator", "controller owner reference to MemoryRuntime web"); err != nil {
		t.Error(err)
	}
	e.waitWarning(t, ns, "web", memoryv1alpha1.ReasonObjectNotOwned, "Service "+ns+"/web")
	// Retried (NotOwnedRetry is 1 s here) without writing anything: not the
	// Service, not the status, not another event.
	e.noWritesIn(t, ns, 2500*time.Millisecond)
	e.unchanged(t, theirs, &corev1.Service{})
	var svc corev1.Service
	if err := e.get(t, ns, "web", &svc); err != nil || svc.Spec.Ports[0].Port != 1234 || len(svc.OwnerReferences) != 0 || svc.Labels[naming.LabelManagedBy] != "" {
		t.Errorf("the foreign Service was changed: %+v, %v", svc, err)
	}
	// Refused before the database: no schema, no role.
	if exists, roles := e.tenantState(t, SchemaFor(rt)); exists || roles != 0 {
		t.Errorf("a refused runtime provisioned its tenant: schema=%v, %d roles", exists, roles)
	}

	// The owner of the Service removes it: the operator notices on its own.
	if err := e.c.Delete(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	e.waitCondition(t, ns, "web", memoryv1alpha1.ConditionDatabaseReady, true, "")
	e.markAvailable(t, ns, "web")
	rt = e.waitCondition(t, ns, "web", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
	if err := e.get(t, ns, "web", &svc); err != nil || !metav1.IsControlledBy(&svc, rt) {
		t.Errorf("the runtime's own Service: %+v, %v", svc.ObjectMeta, err)
	}

	// A Secret planted with Engram's label and an owner reference that
	// looks right but has another uid: still refused, its data kept.
	planted := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "mem-db", Namespace: ns,
			Labels: naming.RuntimeLabels("mem", naming.ComponentCredentials),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: memoryv1alpha1.GroupVersion.String(), Kind: "MemoryRuntime", Name: "mem",
				UID: "00000000-0000-0000-0000-000000000000", Controller: ptr.To(true)}},
		},
		StringData: map[string]string{"uri": "postgres://attacker:pw@evil.example/db", "password": "pw"},
	}
	mustCreate(t, e.c, planted)
	mem := newRuntime(ns, "mem", "")
	e.createRuntime(t, mem)
	got = e.waitCondition(t, ns, "mem", memoryv1alpha1.ConditionReady, false, memoryv1alpha1.ReasonObjectNotOwned)
	msg := got.GetCondition(memoryv1alpha1.ConditionReady).Message
	if err := containsAll(msg, "Secret "+ns+"/mem-db", "with uid "+string(got.UID), "uid 00000000-0000-0000-0000-000000000000"); err != nil {
		t.Error(err)
	}
	if strings.Contains(msg, "the label") {
		t.Errorf("the label is there, the message says it is missing: %s", msg)
	}
	e.waitWarning(t, ns, "mem", memoryv1alpha1.ReasonObjectNotOwned, "Secret "+ns+"/mem-db")
	e.noWritesIn(t, ns, 2500*time.Millisecond)
	e.unchanged(t, planted, &corev1.Secret{})
	if exists, roles := e.tenantState(t, SchemaFor(mem)); exists || roles != 0 {
		t.Errorf("a refused runtime provisioned its tenant: schema=%v, %d roles", exists, roles)
	}
	if err := e.c.Delete(ctx, planted); err != nil {
		t.Fatal(err)
	}
	e.waitCondition(t, ns, "mem", memoryv1alpha1.ConditionDatabaseReady, true, "")
	e.checkCredentials(t, ns, "mem", SchemaFor(rt))
	e.markAvailable(t, ns, "mem")
	e.waitCondition(t, ns, "mem", memoryv1alpha1.ConditionReady, true, memoryv1alpha1.ReasonAvailable)
}

// scenarioForeignCronJobAndJob: the same for a RetentionJob: a foreign CronJob
// with the name of a target's CronJob is not overwritten (Scheduled and
// Ready False, ObjectNotOwned), and a foreign Job with the name of a run-now
// Job does not count as the run (Ready False, the run-now value not marked
// done). Both recover once the name is free.
func scenarioForeignCronJobAndJob(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "foreign-cron")
	ctx := testContext(t)
	e.readyRuntime(t, newRuntime(ns, "bot", ""))

	theirs := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: naming.CronJobName("nightly", "bot"), Namespace: ns},
		Spec: batchv1.CronJobSpec{
			Schedule:    "30 1 * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: foreignJobSpec()},
		},
	}
	mustCreate(t, e.c, theirs)
	rj := newRetentionJob(ns, "nightly", "bot", "0 3 * * *", "expire")
	mustCreate(t, e.c, rj)
	eventually(t, "the RetentionJob reports the foreign CronJob", 20*time.Second, func() error {
		got := e.retentionJob(t, ns, "nightly")
		for _, ct := range []string{memoryv1alpha1.ConditionScheduled, memoryv1alpha1.ConditionReady} {
			c := got.GetCondition(ct)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != memoryv1alpha1.ReasonObjectNotOwned || c.ObservedGeneration != got.Generation {
				return fmt.Errorf("%s = %+v", ct, c)
			}
			if err := containsAll(c.Message, "CronJob "+ns+"/nightly-bot", "RetentionJob "+ns+"/nightly", "not created by Engram"); err != nil {
				return err
			}
		}
		return nil
	})
	e.waitWarning(t, ns, "nightly", memoryv1alpha1.ReasonObjectNotOwned, "CronJob "+ns+"/nightly-bot")
	e.noWritesIn(t, ns, 2500*time.Millisecond)
	e.unchanged(t, theirs, &batchv1.CronJob{})

	if err := e.c.Delete(ctx, theirs, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	var cj batchv1.CronJob
	eventually(t, "the RetentionJob's own CronJob replaces it", 20*time.Second, func() error {
		if err := e.get(t, ns, "nightly-bot", &cj); err != nil {
			return err
		}
		got := e.retentionJob(t, ns, "nightly")
		if !metav1.IsControlledBy(&cj, got) || cj.Spec.Schedule != "0 3 * * *" || !rjReady(got) {
			return fmt.Errorf("CronJob owners %v schedule %q; RetentionJob %+v", cj.OwnerReferences, cj.Spec.Schedule, got.Status.Conditions)
		}
		return nil
	})

	// A Job of someone else with the name of the run-now Job.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: naming.RunNowJobName("nightly-bot", "now-1"), Namespace: ns}, Spec: foreignJobSpec()}
	job.Spec.Suspend = ptr.To(true)
	mustCreate(t, e.c, job)
	update(t, e, rj, func(r *memoryv1alpha1.RetentionJob) {
		metav1.SetMetaDataAnnotation(&r.ObjectMeta, naming.AnnotationRunNow, "now-1")
	})
	eventually(t, "the RetentionJob reports the foreign Job", 20*time.Second, func() error {
		got := e.retentionJob(t, ns, "nightly")
		c := got.GetCondition(memoryv1alpha1.ConditionReady)
		if c == nil || c.Reason != memoryv1alpha1.ReasonObjectNotOwned || got.Status.RunNow == "now-1" {
			return fmt.Errorf("Ready = %+v, runNow %q", c, got.Status.RunNow)
		}
		return containsAll(c.Message, `run-now "now-1" not started`, "Job "+ns+"/"+job.Name, "CronJob "+ns+"/nightly-bot")
	})
	e.waitWarning(t, ns, "nightly", memoryv1alpha1.ReasonObjectNotOwned, "Job "+ns+"/"+job.Name)
	e.unchanged(t, job, &batchv1.Job{})
	if err := e.c.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run-now Job is started once the name is free", 20*time.Second, func() error {
		got := e.retentionJob(t, ns, "nightly")
		var mine batchv1.Job
		if err := e.get(t, ns, job.Name, &mine); err != nil {
			return err
		}
		if !metav1.IsControlledBy(&mine, &cj) || got.Status.RunNow != "now-1" || !rjReady(got) {
			return fmt.Errorf("Job owners %v; runNow %q; conditions %+v", mine.OwnerReferences, got.Status.RunNow, got.Status.Conditions)
		}
		return nil
	})
}

func foreignJobSpec() batchv1.JobSpec {
	return batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers:    []corev1.Container{{Name: "theirs", Image: "registry.example/theirs:1"}},
	}}}
}

// unchanged fails the test when obj's live copy has another resourceVersion
// than obj (as created) or is gone.
func (e *operatorEnv) unchanged(t *testing.T, obj client.Object, live client.Object) {
	t.Helper()
	if err := e.get(t, obj.GetNamespace(), obj.GetName(), live); err != nil {
		t.Errorf("%T %s: %v", obj, obj.GetName(), err)
		return
	}
	if live.GetResourceVersion() != obj.GetResourceVersion() || len(live.GetOwnerReferences()) != len(obj.GetOwnerReferences()) {
		t.Errorf("%T %s was written: resourceVersion %s -> %s, owners %v", obj, obj.GetName(), obj.GetResourceVersion(), live.GetResourceVersion(), live.GetOwnerReferences())
	}
}

// waitWarning waits for a Warning event about the object named regarding,
// with reason and a note containing note.
func (e *operatorEnv) waitWarning(t *testing.T, ns, regarding, reason, note string) {
	t.Helper()
	eventually(t, "a Warning "+reason+" event about "+regarding, 20*time.Second, func() error {
		var list eventsv1.EventList
		if err := e.c.List(testContext(t), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.Regarding.Name == regarding && ev.Reason == reason && ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Note, note) {
				return nil
			}
			seen = append(seen, ev.Type+" "+ev.Reason+" "+ev.Regarding.Name+": "+ev.Note)
		}
		return fmt.Errorf("events: %v", seen)
	})
}

// noWritesIn fails the test when the operator writes anything in namespace
// ns during d, once the writes of what the test just saw have landed (the
// refusal's event and status patch may follow the condition the test
// waited for; an operator that writes on every retry never settles).
func (e *operatorEnv) noWritesIn(t *testing.T, ns string, d time.Duration) {
	t.Helper()
	e.settle(t, ns)
	mark := e.writes.count()
	time.Sleep(d)
	var inNS []string
	for _, w := range e.writes.since(mark) {
		if strings.Contains(w, "/namespaces/"+ns+"/") {
			inNS = append(inNS, w)
		}
	}
	if len(inNS) > 0 {
		t.Errorf("%d writes in namespace %s within %s while refusing: %v", len(inNS), ns, d, inNS)
	}
}

func rjReady(rj *memoryv1alpha1.RetentionJob) bool {
	c := rj.GetCondition(memoryv1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == rj.Generation
}
