package controller

import (
	"fmt"
	"strings"
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

// HIGH 2 of issue 26's thirteenth review: whoever may create a Secret
// anywhere the operator watches could give it about a megabyte of labels,
// and the metadata cache kept them all. It keeps only the clusterConnection
// label now.
func TestKeepIdentityOnlyKeepsOnlyTheConnectionLabel(t *testing.T) {
	many := map[string]string{"memory.engram.dev/connection": "main"}
	for i := range 1000 {
		many[fmt.Sprintf("l%08d", i)] = strings.Repeat("v", 63)
	}
	m := secretMetadata()
	m.ObjectMeta = metav1.ObjectMeta{Name: "pg", Namespace: "team-a", Labels: many}
	out, _ := keepIdentityOnly(m)
	got := out.(*metav1.PartialObjectMetadata).Labels
	if len(got) != 1 || got["memory.engram.dev/connection"] != "main" {
		t.Errorf("kept %d labels, want only the connection label", len(got))
	}
	m = secretMetadata()
	m.ObjectMeta = metav1.ObjectMeta{Name: "tags", Namespace: "team-evil", Labels: map[string]string{"a": "b", "c": "d"}}
	out, _ = keepIdentityOnly(m)
	if got := out.(*metav1.PartialObjectMetadata).Labels; got != nil {
		t.Errorf("a Secret without the connection label kept labels %v", got)
	}
}

// What the Secret reader keeps of a Secret: each value at most
// maxSecretValueBytes, all of them at most maxSecretKeptBytes, in key order.
func TestKeptOfSecretBoundsTheValues(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n", ResourceVersion: "3"}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{}}
	for i := range 8 {
		s.Data[fmt.Sprintf("k%d", i)] = []byte(strings.Repeat("v", 15<<10))
	}
	s.Data["a-too-big"] = []byte(strings.Repeat("v", maxSecretValueBytes+1))
	got := keptOfSecret(s)
	if _, ok := got.Data["a-too-big"]; ok {
		t.Error("a value over the cap was kept")
	}
	total := 0
	for k, v := range got.Data {
		total += len(k) + len(v)
	}
	if total > maxSecretKeptBytes || len(got.Data) != 4 || got.Data["k0"] == nil || got.Data["k3"] == nil {
		t.Errorf("kept %d values, %d bytes", len(got.Data), total)
	}
	if got.Type != corev1.SecretTypeTLS || got.ResourceVersion != "3" {
		t.Errorf("identity lost: %+v", got.ObjectMeta)
	}
}

// A value the reader did not keep for its size reads as absent; the kept
// copy names it so the condition says "too big", not only "missing".
func TestOverBoundValueIsNamedAsTooBig(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n"}, Data: map[string][]byte{
		"api-key": []byte(strings.Repeat("k", maxSecretValueBytes+1)),
		"small":   []byte("x"),
	}}
	for i := range 10 {
		s.Data[fmt.Sprintf("z%d", i)] = []byte(strings.Repeat("v", maxSecretValueBytes+1))
	}
	got := keptOfSecret(s)
	note := overBoundNote(got)
	if !strings.Contains(note, `api-key`) || !strings.Contains(note, "too big") {
		t.Errorf("note %q does not name api-key as too big", note)
	}
	if n := strings.Count(got.Annotations["memory.engram.dev/reader-values-over-bound"], ",") + 1; n != maxOverBoundNamed {
		t.Errorf("named %d keys over the bound, want at most %d", n, maxOverBoundNamed)
	}
	if overBoundNote(keptOfSecret(&corev1.Secret{Data: map[string][]byte{"small": []byte("x")}})) != "" {
		t.Error("a Secret with every value kept has a note")
	}
}
