package controller

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/tenant"
)

// scenarioDrift: every kind of drift is real and repaired, each with its
// event: the owned Deployment deleted and edited, the credentials Secret
// edited and deleted, the ConfigMap and Service edited, a grant revoked and
// the login role dropped in PostgreSQL.
//
// Kubernetes drift is seen at once (the operator watches what it owns).
// Database drift is not watched: the operator verifies roles and grants
// every GrantCheckInterval (10 min in this suite). The test triggers the
// next verification as a user would, with the rotate-credentials
// annotation: a requested rotation verifies and repairs the tenant first.
func scenarioDrift(e *operatorEnv, t *testing.T) {
	ns := e.botNamespace(t, "drift")
	var d appsv1.Deployment
	if err := e.get(t, ns, "bot", &d); err != nil {
		t.Fatal(err)
	}
	mark := time.Now()
	if err := e.c.Delete(testContext(t), &d); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Deployment is recreated", 20*time.Second, func() error {
		var again appsv1.Deployment
		if err := e.get(t, ns, "bot", &again); err != nil {
			return err
		}
		if again.UID == d.UID {
			return errors.New("still the old Deployment")
		}
		return nil
	})
	e.waitEventSince(t, ns, "bot", "DeploymentCreated", "created Deployment bot", mark)
	e.markAvailable(t, ns, "bot")

	mark = time.Now()
	update(t, e, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns}}, func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/evil:latest"
	})
	eventually(t, "the edited Deployment is restored", 20*time.Second, func() error {
		var again appsv1.Deployment
		if err := e.get(t, ns, "bot", &again); err != nil {
			return err
		}
		if img := again.Spec.Template.Spec.Containers[0].Image; img != testImage {
			return fmt.Errorf("image %s", img)
		}
		return nil
	})
	e.waitEventSince(t, ns, "bot", "DeploymentUpdated", "updated Deployment bot", mark)
	e.markAvailable(t, ns, "bot")

	var s corev1.Secret
	if err := e.get(t, ns, "bot-db", &s); err != nil {
		t.Fatal(err)
	}
	uri, password := string(s.Data["uri"]), string(s.Data["password"])
	mark = time.Now()
	update(t, e, &s, func(s *corev1.Secret) { s.Data["uri"] = []byte("postgres://evil@elsewhere/db") })
	eventually(t, "the edited uri is restored", 20*time.Second, func() error {
		var again corev1.Secret
		if err := e.get(t, ns, "bot-db", &again); err != nil {
			return err
		}
		if string(again.Data["uri"]) != uri {
			return fmt.Errorf("uri = %s", again.Data["uri"])
		}
		return nil
	})
	e.waitEventSince(t, ns, "bot", "SecretUpdated", "updated Secret bot-db", mark)

	hash := e.templateHash(t, ns, "bot")
	mark = time.Now()
	update(t, e, &s, func(s *corev1.Secret) { s.Data["password"] = []byte("typed-by-hand") })
	eventually(t, "a hand-edited password is replaced by a rotation", 20*time.Second, func() error {
		var again corev1.Secret
		if err := e.get(t, ns, "bot-db", &again); err != nil {
			return err
		}
		pw, ok := specs.StoredPassword(&again)
		if !ok || pw == password || pw == "typed-by-hand" {
			return fmt.Errorf("password %q intact=%v", again.Data["password"], ok)
		}
		return nil
	})
	e.waitEventSince(t, ns, "bot", "CredentialsRotated", "changed by hand", mark)
	other := SchemaFor(newRuntime(ns, "other", ""))
	e.checkCredentials(t, ns, "bot", other)
	eventually(t, "the rotation rolls the pods", 20*time.Second, func() error {
		if e.templateHash(t, ns, "bot") == hash {
			return errors.New("pod template hash unchanged")
		}
		return nil
	})

	// The credentials Secret deleted: PostgreSQL keeps no readable copy of
	// the password, so the operator sets a new one and writes it.
	if err := e.get(t, ns, "bot-db", &s); err != nil {
		t.Fatal(err)
	}
	oldURI := string(s.Data["uri"])
	mark = time.Now()
	if err := e.c.Delete(testContext(t), &s); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted credentials Secret is recreated", 20*time.Second, func() error {
		var again corev1.Secret
		if err := e.get(t, ns, "bot-db", &again); err != nil {
			return err
		}
		if again.UID == s.UID || string(again.Data["uri"]) == oldURI {
			return errors.New("still the old Secret")
		}
		return nil
	})
	e.waitEventSince(t, ns, "bot", "CredentialsRotated", "Secret was missing", mark)
	e.waitEventSince(t, ns, "bot", "SecretCreated", "created Secret bot-db", mark)
	e.checkCredentials(t, ns, "bot", other)
	e.mustNotLogIn(t, oldURI, "the password of the deleted Secret")

	mark = time.Now()
	update(t, e, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bot-config", Namespace: ns}}, func(cm *corev1.ConfigMap) {
		cm.Data["config.yaml"] = "schema: hijacked\n"
	})
	update(t, e, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns}}, func(s *corev1.Service) {
		s.Spec.Ports[0].Port = 9999
	})
	eventually(t, "the ConfigMap and Service are restored", 20*time.Second, func() error {
		var cm corev1.ConfigMap
		if err := e.get(t, ns, "bot-config", &cm); err != nil {
			return err
		}
		if strings.Contains(cm.Data["config.yaml"], "hijacked") {
			return errors.New("the ConfigMap still holds the edit")
		}
		var svc corev1.Service
		if err := e.get(t, ns, "bot", &svc); err != nil || svc.Spec.Ports[0].Port != 8080 {
			return fmt.Errorf("service port %v, %v", svc.Spec.Ports, err)
		}
		return nil
	})
	e.waitEventSince(t, ns, "bot", "ConfigMapUpdated", "updated ConfigMap bot-config", mark)
	e.waitEventSince(t, ns, "bot", "ServiceUpdated", "updated Service bot", mark)
	if cfg := e.serviceConfig(t, ns, "bot"); cfg.Schema != SchemaFor(newRuntime(ns, "bot", "")) {
		t.Errorf("restored config has schema %s", cfg.Schema)
	}

	// A grant revoked in PostgreSQL: the service could no longer add.
	schema := SchemaFor(newRuntime(ns, "bot", ""))
	login := tenant.LoginRole(schema)
	ctx := testContext(t)
	memories := pgx.Identifier{schema, "memories"}.Sanitize()
	if _, err := e.pool.Exec(ctx, "REVOKE INSERT ON "+memories+" FROM "+pgx.Identifier{login}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	mark = time.Now()
	e.rotate(t, ns, "bot", "drift-grant")
	e.waitEventSince(t, ns, "bot", memoryv1alpha1.ReasonProvisioned, "granted INSERT on "+schema+".memories", mark)
	var canInsert bool
	if err := e.pool.QueryRow(ctx, `SELECT has_table_privilege($1, $2, 'INSERT')`, login, memories).Scan(&canInsert); err != nil || !canInsert {
		t.Errorf("INSERT on memories not granted back (%v)", err)
	}
	e.checkCredentials(t, ns, "bot", other)

	// The login role dropped: a new role, a new password in the Secret.
	if err := e.get(t, ns, "bot-db", &s); err != nil {
		t.Fatal(err)
	}
	oldURI = string(s.Data["uri"])
	ident := pgx.Identifier{login}.Sanitize()
	if _, err := e.pool.Exec(ctx, "DROP OWNED BY "+ident+"; DROP ROLE "+ident); err != nil {
		t.Fatal(err)
	}
	mark = time.Now()
	e.rotate(t, ns, "bot", "drift-role")
	e.waitEventSince(t, ns, "bot", memoryv1alpha1.ReasonProvisioned, "created role "+login, mark)
	eventually(t, "a new password in the Secret", 20*time.Second, func() error {
		if err := e.get(t, ns, "bot-db", &s); err != nil {
			return err
		}
		if string(s.Data["uri"]) == oldURI {
			return errors.New("the Secret still holds the dropped role's password")
		}
		return nil
	})
	if exists, roles := e.tenantState(t, schema); !exists || roles != 2 {
		t.Errorf("schema exists=%v with %d roles, want the schema and 2 roles", exists, roles)
	}
	e.checkCredentials(t, ns, "bot", other)
	e.mustNotLogIn(t, oldURI, "the dropped role's password")
	e.markAvailable(t, ns, "bot")
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, "")
}

// rotate sets the rotate-credentials annotation and waits until the
// operator recorded the value.
func (e *operatorEnv) rotate(t *testing.T, ns, name, value string) {
	t.Helper()
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) {
		metav1.SetMetaDataAnnotation(&r.ObjectMeta, naming.AnnotationRotateCredentials, value)
	})
	eventually(t, "rotation "+value+" recorded", 20*time.Second, func() error {
		if err := e.get(t, ns, name, rt); err != nil {
			return err
		}
		if rt.Status.RotatedCredentials != value {
			return fmt.Errorf("status.rotatedCredentials = %q", rt.Status.RotatedCredentials)
		}
		return nil
	})
}

// mustNotLogIn fails the test if uri still logs in.
func (e *operatorEnv) mustNotLogIn(t *testing.T, uri, what string) {
	t.Helper()
	ctx := testContext(t)
	if c, err := pgx.Connect(ctx, uri); err == nil {
		_ = c.Close(ctx)
		t.Errorf("%s still logs in", what)
	}
}

// waitEventSince waits for an event about a runtime with reason and a note
// containing text, recorded (or repeated, for a series) after since.
func (e *operatorEnv) waitEventSince(t *testing.T, ns, name, reason, text string, since time.Time) {
	t.Helper()
	since = since.Truncate(time.Microsecond) // events carry microseconds
	eventually(t, fmt.Sprintf("event %s (%q) about %s/%s", reason, text, ns, name), 30*time.Second, func() error {
		var seen []string
		for _, ev := range e.events(t, ns, name) {
			at := ev.EventTime.Time
			if ev.Series != nil {
				at = ev.Series.LastObservedTime.Time
			}
			if ev.Reason == reason && !at.Before(since) && strings.Contains(ev.Note, text) {
				return nil
			}
			if ev.Reason == reason {
				seen = append(seen, ev.Note)
			}
		}
		return fmt.Errorf("none since %s; %s events: %q", since.Format(time.StampMicro), reason, seen)
	})
}

// scenarioRotateAndPause: the rotate-credentials annotation rotates once per
// value; a paused runtime is left alone until it is resumed.
func scenarioRotateAndPause(e *operatorEnv, t *testing.T) {
	ns := e.botNamespace(t, "rotate")
	var s corev1.Secret
	if err := e.get(t, ns, "bot-db", &s); err != nil {
		t.Fatal(err)
	}
	oldURI := string(s.Data["uri"])
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns}}
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) {
		metav1.SetMetaDataAnnotation(&r.ObjectMeta, naming.AnnotationRotateCredentials, "2025-06-01")
	})
	var rotated string
	eventually(t, "the rotation is done and recorded", 20*time.Second, func() error {
		if err := e.get(t, ns, "bot", rt); err != nil {
			return err
		}
		if err := e.get(t, ns, "bot-db", &s); err != nil {
			return err
		}
		rotated = string(s.Data["uri"])
		if rt.Status.RotatedCredentials != "2025-06-01" || rotated == oldURI {
			return fmt.Errorf("rotatedCredentials %q, uri changed %v", rt.Status.RotatedCredentials, rotated != oldURI)
		}
		return nil
	})
	ctx := testContext(t)
	if c, err := pgx.Connect(ctx, oldURI); err == nil {
		c.Close(ctx)
		t.Error("the old password still logs in")
	}
	e.checkCredentials(t, ns, "bot", SchemaFor(newRuntime(ns, "other", "")))
	// Once per value: nothing more happens for the same value.
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { metav1.SetMetaDataLabel(&r.ObjectMeta, "touched", "yes") })
	time.Sleep(time.Second)
	if err := e.get(t, ns, "bot-db", &s); err != nil || string(s.Data["uri"]) != rotated {
		t.Errorf("the same annotation value rotated again (%v)", err)
	}

	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Paused = true })
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionPaused, true, memoryv1alpha1.ReasonPaused)
	update(t, e, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns}}, func(s *corev1.Service) { s.Spec.Ports[0].Port = 9999 })
	time.Sleep(2 * time.Second)
	var svc corev1.Service
	if err := e.get(t, ns, "bot", &svc); err != nil || svc.Spec.Ports[0].Port != 9999 {
		t.Errorf("a paused runtime's Service was changed: %v %v", svc.Spec.Ports, err)
	}
	update(t, e, rt, func(r *memoryv1alpha1.MemoryRuntime) { r.Spec.Paused = false })
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionPaused, false, memoryv1alpha1.ReasonNotPaused)
	eventually(t, "the Service is restored after resuming", 20*time.Second, func() error {
		if err := e.get(t, ns, "bot", &svc); err != nil || svc.Spec.Ports[0].Port != 8080 {
			return fmt.Errorf("ports %v, %v", svc.Spec.Ports, err)
		}
		return nil
	})
	e.waitCondition(t, ns, "bot", memoryv1alpha1.ConditionReady, true, "")
}
