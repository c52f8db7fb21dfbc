package controller

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
)

func TestDecideProvision(t *testing.T) {
	base := provisionObserved{fingerprint: "f", last: "f", dbReady: true, sinceCheck: time.Minute, interval: 10 * time.Minute}
	cases := []struct {
		name  string
		edit  func(*provisionObserved)
		now   bool
		dueIn time.Duration
	}{
		{"verified recently: nothing asked of PostgreSQL", func(*provisionObserved) {}, false, 9 * time.Minute},
		{"fresh (never provisioned by this process)", func(o *provisionObserved) { o.last, o.dbReady = "", false }, true, 0},
		{"restarted operator, Ready tenant: verified once", func(o *provisionObserved) { o.last = "" }, true, 0},
		{"spec changed (schema, dimensions or connection)", func(o *provisionObserved) { o.fingerprint = "g" }, true, 0},
		{"DatabaseReady is False", func(o *provisionObserved) { o.dbReady = false }, true, 0},
		{"rotation requested: verify and repair first", func(o *provisionObserved) { o.rotateAsked = true }, true, 0},
		{"grant check due", func(o *provisionObserved) { o.sinceCheck = 10 * time.Minute }, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := base
			c.edit(&o)
			now, due := decideProvision(o)
			if now != c.now || due != c.dueIn {
				t.Errorf("decideProvision = %v, %s; want %v, %s", now, due, c.now, c.dueIn)
			}
		})
	}
}

func TestDecideCredentials(t *testing.T) {
	valid := credentialsObserved{found: true, intact: true, stored: "pw"}
	cases := []struct {
		name string
		o    credentialsObserved
		want credentialsAction
	}{
		{"valid: keep the stored password", valid, credentialsAction{password: "pw"}},
		{"new login role: its password", credentialsObserved{created: "new"}, credentialsAction{password: "new"}},
		{"new login role wins over a requested rotation", credentialsObserved{created: "new", rotateAsked: true, rotateValue: "1"}, credentialsAction{password: "new"}},
		{"missing", credentialsObserved{}, credentialsAction{rotate: true, why: "the credentials Secret was missing", metric: "secret_missing", action: "RotateSecretMissing"}},
		{"edited by hand", credentialsObserved{found: true, stored: "x"}, credentialsAction{rotate: true, why: "the password in the credentials Secret was changed by hand", metric: "secret_edited", action: "RotateSecretEdited"}},
		{"rotation requested", credentialsObserved{found: true, intact: true, stored: "pw", rotateAsked: true, rotateValue: "2026-01"},
			credentialsAction{rotate: true, why: "the rotate-credentials annotation changed to 2026-01", metric: "requested", action: "RotateRequested"}},
		{"moved to another server: the old server's password is not the new one's", credentialsObserved{found: true, intact: true, stored: "pw", moved: true},
			credentialsAction{rotate: true, why: "the tenant moved to another server", metric: "moved", action: "RotateMoved"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := decideCredentials(c.o); got != c.want {
				t.Errorf("decideCredentials = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestRotationEventsOfDistinctCausesStayDistinct: the events API merges
// events with one regarding object, reason and action into a series that
// keeps its first note, so each cause of a rotation has its own action.
func TestRotationEventsOfDistinctCausesStayDistinct(t *testing.T) {
	causes := map[string]credentialsObserved{
		"requested": {found: true, intact: true, stored: "pw", rotateAsked: true, rotateValue: "1"},
		"missing":   {},
		"edited":    {found: true, stored: "x"},
		"moved":     {found: true, intact: true, stored: "pw", moved: true},
	}
	seen := map[string]string{}
	for name, o := range causes {
		a := decideCredentials(o)
		if !a.rotate || a.action == "" {
			t.Fatalf("%s: %+v is no rotation with an action", name, a)
		}
		if other, dup := seen[a.action]; dup {
			t.Errorf("%s and %s share the event action %q: their events would merge into one series", name, other, a.action)
		}
		seen[a.action] = name
	}
}

func TestRotationPending(t *testing.T) {
	cases := []struct {
		name                        string
		value, recorded, remembered string
		want                        bool
	}{
		{"no annotation", "", "", "", false},
		{"rotation requested", "2", "1", "1", true},
		{"rotation done (in status)", "2", "2", "", false},
		{"rotation done (status not in the cache yet)", "2", "1", "2", false},
		{"restarted operator, rotation done", "2", "2", "", false},
	}
	for _, c := range cases {
		if got := rotationPending(c.value, c.recorded, c.remembered); got != c.want {
			t.Errorf("%s: rotationPending = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestJobScheduling: suspend and concurrencyPolicy reach the CronJob, and
// the run-now annotation starts a run once per value.
func TestJobScheduling(t *testing.T) {
	cases := []struct {
		name        string
		edit        func(*memoryv1alpha1.RetentionJob)
		suspend     bool
		concurrency batchv1.ConcurrencyPolicy
	}{
		{"defaults", func(j *memoryv1alpha1.RetentionJob) { j.Spec.ConcurrencyPolicy = "" }, false, batchv1.ForbidConcurrent},
		{"suspend", func(j *memoryv1alpha1.RetentionJob) { j.Spec.Suspend = true }, true, batchv1.ReplaceConcurrent},
		{"concurrency Allow", func(j *memoryv1alpha1.RetentionJob) { j.Spec.ConcurrencyPolicy = memoryv1alpha1.ConcurrencyAllow }, false, batchv1.AllowConcurrent},
		{"concurrency Replace", func(*memoryv1alpha1.RetentionJob) {}, false, batchv1.ReplaceConcurrent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rj := testRetentionJob()
			c.edit(rj)
			cj := specs.CronJob(rj, testRuntime(), "img")
			if ptr.Deref(cj.Spec.Suspend, false) != c.suspend || cj.Spec.ConcurrencyPolicy != c.concurrency {
				t.Errorf("suspend %v concurrency %s; want %v %s", ptr.Deref(cj.Spec.Suspend, false), cj.Spec.ConcurrencyPolicy, c.suspend, c.concurrency)
			}
		})
	}
	runNow := []struct {
		name, value, acted string
		want               bool
	}{
		{"no annotation", "", "", false},
		{"new value: run now", "a", "", true},
		{"another new value", "b", "a", true},
		{"value acted on: no second run", "a", "a", false},
	}
	for _, c := range runNow {
		if got := decideRunNow(c.value, c.acted); got != c.want {
			t.Errorf("run-now %s: %v, want %v", c.name, got, c.want)
		}
	}
}
