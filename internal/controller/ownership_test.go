package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/naming"
)

// checkOwned accepts only an object with BOTH the managed-by label and a
// controller reference with the owner's uid, and says what is missing.
func TestCheckOwned(t *testing.T) {
	rt := testRuntime()
	owner := runtimeOwnerRef(rt)
	otherUID := owner
	otherUID.UID = types.UID("uid-of-a-deleted-bot")
	notController := owner
	notController.Controller = nil
	managed := map[string]string{naming.LabelManagedBy: naming.ManagedBy}

	for _, c := range []struct {
		name    string
		labels  map[string]string
		refs    []metav1.OwnerReference
		want    []string // parts of the message; none = accepted
		notWant []string
	}{
		{name: "Engram's", labels: managed, refs: []metav1.OwnerReference{owner}},
		{name: "nothing", want: []string{
			"Service team-a/bot exists but was not created by Engram for MemoryRuntime team-a/bot (uid uid-1)",
			"the label app.kubernetes.io/managed-by=engram-operator and a controller owner reference to MemoryRuntime bot",
			"delete or rename it",
		}},
		{name: "label only (forged)", labels: managed, want: []string{"a controller owner reference to MemoryRuntime bot"}, notWant: []string{"the label"}},
		{name: "owner reference without the label", refs: []metav1.OwnerReference{owner}, want: []string{"the label app.kubernetes.io/managed-by=engram-operator"}, notWant: []string{"owner reference"}},
		{name: "label with another helm value", labels: map[string]string{naming.LabelManagedBy: "Helm"}, refs: []metav1.OwnerReference{owner}, want: []string{"the label"}},
		{name: "owner reference that is not the controller", labels: managed, refs: []metav1.OwnerReference{notController}, want: []string{"a controller owner reference"}},
		{name: "a former runtime of the same name", labels: managed, refs: []metav1.OwnerReference{otherUID}, want: []string{
			"with uid uid-1", "its controller is MemoryRuntime bot, uid uid-of-a-deleted-bot", "garbage collector removes shortly",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			live := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: "team-a", Labels: c.labels, OwnerReferences: c.refs}}
			err := checkOwned("Service", live, owner)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused Engram's own object: %v", err)
				}
				return
			}
			if asNotOwned(err) == nil {
				t.Fatalf("accepted; want a refusal (err = %v)", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q\nlacks %q", err, w)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("message %q\nshould not mention %q", err, w)
				}
			}
		})
	}
}

// Every builder sets a controller reference; without one (or without a uid)
// nothing is applied, since ownership could not be checked.
func TestControllerRefRequired(t *testing.T) {
	svc := specs.Service(testRuntime())
	if ref, err := controllerRef(svc); err != nil || ref.UID != "uid-1" {
		t.Errorf("controllerRef = %+v, %v", ref, err)
	}
	svc.OwnerReferences[0].UID = ""
	if _, err := controllerRef(svc); err == nil {
		t.Error("an owner reference without uid was accepted")
	}
	svc.OwnerReferences = nil
	if _, err := controllerRef(svc); err == nil {
		t.Error("an object without controller reference was accepted")
	}
}
