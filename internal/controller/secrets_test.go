package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The metadata cache of Secrets keeps no data and no annotations (kubectl
// apply copies a Secret's data into last-applied-configuration).
func TestKeepIdentityOnly(t *testing.T) {
	m := secretMetadata()
	m.ObjectMeta = metav1.ObjectMeta{
		Name: "pg", Namespace: "team-a", UID: "u", ResourceVersion: "42",
		Labels:          map[string]string{"memory.engram.dev/connection": "main"},
		Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"uri":"cG9zdGdyZXM6Ly9zZWNyZXQ="}}`},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		OwnerReferences: []metav1.OwnerReference{{Name: "x"}},
	}
	out, err := keepIdentityOnly(m)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*metav1.PartialObjectMetadata)
	if got.Name != "pg" || got.Namespace != "team-a" || got.UID != "u" || got.ResourceVersion != "42" || got.Labels["memory.engram.dev/connection"] != "main" {
		t.Errorf("identity lost: %+v", got.ObjectMeta)
	}
	if got.Annotations != nil || got.ManagedFields != nil || got.OwnerReferences != nil {
		t.Errorf("kept more than identity: %+v", got.ObjectMeta)
	}
	if got.Kind != "Secret" {
		t.Errorf("kind = %q", got.Kind)
	}
	// Anything else passes through unchanged.
	s := &corev1.Secret{Data: map[string][]byte{"k": []byte("v")}}
	if out, _ := keepIdentityOnly(s); out != s {
		t.Error("a non-metadata object was changed")
	}
}
