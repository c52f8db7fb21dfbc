package controller

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// scenarioMultiHostSecretRefused (issue 26's fifth review, MEDIUM 3b): a
// tenant's connection Secret could hold a multi-host URL whose first host
// is the shared server and whose next is the tenant's own. pgx moves on to
// the next host when the first answers "too many connections for role",
// which the tenant causes at will; the runtime was then provisioned on the
// tenant's server but known by the shared server's address, and the
// operator's LocksExceeded events about a role there with a forged marker
// landed on another tenant's runtime. Now a connection Secret of a
// runtime's namespace naming more than one server is ConnectionInvalid,
// with nothing provisioned.
func scenarioMultiHostSecretRefused(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "multihost")
	u, err := url.Parse(e.adminURL)
	if err != nil {
		t.Fatal(err)
	}
	// The shared server first, then another address of the same one
	// (it stands for the tenant's own server: the refusal reads the URL).
	u.Host = fmt.Sprintf("%s,localhost:%s", u.Host, u.Port())
	sec := connectionSecret(ns, "own", u.String())
	mustCreate(t, e.c, sec)
	rt := newRuntime(ns, "fallback", "")
	rt.Spec.Database = memoryv1alpha1.DatabaseSpec{ConnectionSecretRef: &memoryv1alpha1.SecretKeySelector{Name: sec.Name}}
	e.createRuntime(t, rt)
	got := e.waitCondition(t, ns, "fallback", memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonConnectionInvalid)
	if c := got.GetCondition(memoryv1alpha1.ConditionDatabaseReady); c == nil || !strings.Contains(c.Message, "more than one server") {
		t.Fatalf("the condition %+v does not say the Secret names more than one server", c)
	}
	if got.Status.Schema != "" {
		t.Fatalf("status.schema = %q; want nothing provisioned", got.Status.Schema)
	}
}
