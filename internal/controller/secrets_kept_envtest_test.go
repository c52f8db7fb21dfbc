package controller

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/engram-dev/engram/internal/naming"
)

// MEDIUM 1 of issue 26's thirteenth review: the Secret reader remembered a
// whole copy of each Secret a runtime names (up to 1 MiB of data, plus the
// copy kubectl apply keeps in an annotation) for two grant-check intervals.
// It keeps the values the operator can use now, each capped, and nothing else.
func TestSecretReaderRemembersOnlyBoundedValues(t *testing.T) {
	const ns = "team-a"
	ctx, cfg, c := ownControlPlane(t, time.Minute, ns)
	big := strings.Repeat("x", 900_000)
	uri := "postgres://u:p@db.example:5432/app"
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: ns,
			Labels:      map[string]string{naming.LabelConnection: "main", "other": "label"},
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": big[:200_000]}},
		Data: map[string][]byte{"uri": []byte(uri), "junk": []byte(big)},
	}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	meta := startMetadataCache(ctx, t, cfg, c.Scheme())
	r := newSecretReader(meta, c, time.Minute)
	for range 2 { // the second read is from memory: the same answer
		var got corev1.Secret
		if err := r.Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
			t.Fatal(err)
		}
		if string(got.Data["uri"]) != uri || got.Labels[naming.LabelConnection] != "main" {
			t.Errorf("the reader lost what the operator reads: uri %q, labels %v", got.Data["uri"], got.Labels)
		}
		// The one annotation is the reader's own: the key it did not keep.
		if _, ok := got.Data["junk"]; ok || len(got.Annotations) != 1 || got.Annotations[naming.AnnotationValuesOverBound] != "junk" || len(got.Labels) != 1 {
			t.Errorf("the reader hands out more than it needs: keys %d, annotations %d, labels %v", len(got.Data), len(got.Annotations), got.Labels)
		}
	}
	kept := 0
	for _, k := range r.known {
		kept += k.secret.Size()
	}
	if kept > maxSecretKeptBytes+4096 {
		t.Errorf("the reader remembers %d bytes of one Secret, the most is %d and its identity", kept, maxSecretKeptBytes)
	}
	t.Logf("a Secret of %d bytes of data and %d of annotations: the reader remembers %d bytes", len(big)+len(uri), 200_000, kept)
}

// HIGH 2 of issue 26's thirteenth review, on a real API server: 32 Secrets
// with about 0.86 MB of labels each, no Engram label, cost the metadata
// cache +72 MiB. It keeps no label of theirs now.
func TestMetadataCacheKeepsNoLabelsOfTenantSecrets(t *testing.T) {
	const secrets, labels = 32, 12_000 // bounded: about 28 MB of labels in all
	const ns = "team-evil"
	ctx, cfg, c := ownControlPlane(t, 2*time.Minute, ns)
	lbl := map[string]string{}
	for i := range labels {
		lbl[fmt.Sprintf("l%08d", i)] = strings.Repeat("0", 63)
	}
	for i := range secrets {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("tags-%d", i), Labels: lbl}}
		if err := c.Create(ctx, s); err != nil {
			t.Fatalf("creating Secret %d: %v", i, err)
		}
	}
	before := heapBytes()
	meta := startMetadataCache(ctx, t, cfg, c.Scheme())
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := meta.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	grew := int64(heapBytes()) - int64(before)
	t.Logf("%d Secrets with %d labels each: the metadata cache holds %d, heap %+d KiB (2 shared cores)", secrets, labels, len(list.Items), grew/1024)
	if len(list.Items) != secrets {
		t.Fatalf("the cache holds %d Secrets, want %d", len(list.Items), secrets)
	}
	for _, m := range list.Items {
		if m.Labels != nil {
			t.Fatalf("Secret %s: the cache keeps %d labels", m.Name, len(m.Labels))
		}
	}
	// Before: about twice the labels' bytes. The cache's own start is in
	// the figure too; a quarter of the labels is far from both outcomes.
	if grew > secrets*labels*72/4 {
		t.Errorf("the metadata cache grew %d KiB for %d Secrets' labels", grew/1024, secrets)
	}
	runtime.KeepAlive(list)
}
