package controller

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// scenarioTenantURLFileRefused (issue 26's sixth review, HIGH 1): a
// tenant's connection Secret whose URL names a file of the operator's
// (sslrootcert=/dev/zero grew the operator past its memory limit at every
// reconcile; here a FIFO nobody writes, which blocked the reconcile for
// ever and costs no memory if this regresses) is ConnectionInvalid at
// once, naming the key, with nothing provisioned; so is a host in the
// query, which overrode the URL's for the operator but not for the memory
// service.
func scenarioTenantURLFileRefused(e *operatorEnv, t *testing.T) {
	ns := e.newNamespace(t, "tenanturl")
	fifo := filepath.Join(t.TempDir(), "never-written")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(e.adminURL, "?") {
		sep = "&"
	}
	for name, query := range map[string]string{
		"fifo":      "sslmode=verify-ca&sslrootcert=" + fifo,
		"queryhost": "host=127.0.0.2",
	} {
		sec := connectionSecret(ns, name, e.adminURL+sep+query)
		mustCreate(t, e.c, sec)
		rt := newRuntime(ns, name, "")
		rt.Spec.Database = memoryv1alpha1.DatabaseSpec{ConnectionSecretRef: &memoryv1alpha1.SecretKeySelector{Name: sec.Name}}
		e.createRuntime(t, rt)
	}
	for name, key := range map[string]string{"fifo": "sslrootcert", "queryhost": "host"} {
		got := e.waitCondition(t, ns, name, memoryv1alpha1.ConditionDatabaseReady, false, memoryv1alpha1.ReasonConnectionInvalid)
		if c := got.GetCondition(memoryv1alpha1.ConditionDatabaseReady); c == nil || !strings.Contains(c.Message, `may not set "`+key+`"`) {
			t.Errorf("runtime %s: the condition %+v does not name the refused key %q", name, c, key)
		}
		if got.Status.Schema != "" {
			t.Errorf("runtime %s: status.schema = %q; want nothing provisioned", name, got.Status.Schema)
		}
	}
}
