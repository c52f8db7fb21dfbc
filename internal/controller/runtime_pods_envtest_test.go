package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// pageCounter is a client.Reader that records the largest page of Pods one
// list call handed out.
type pageCounter struct {
	client.Reader
	calls, largest int
}

func (p *pageCounter) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := p.Reader.List(ctx, list, opts...)
	if pods, ok := list.(*corev1.PodList); ok {
		p.calls++
		p.largest = max(p.largest, len(pods.Items))
	}
	return err
}

// MEDIUM 1 of issue 26's fourteenth review: podTrouble listed every Pod
// carrying the runtime's selector labels at once, whole, every 15 s, and a
// team's decoy Pods of 0.9 MB made one look hold 90 MiB. It reads podPage
// Pods a call now, stops at the first trouble, and at maxPodPages pages.
func TestPodTroubleReadsPodsAFewAtATime(t *testing.T) {
	const decoys, pad = 40, 100_000 // bounded: 4 MB in all
	ns := "team-decoy"
	ctx, _, c := ownControlPlane(t, 2*time.Minute, ns)
	rt := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "bot", Namespace: ns}}
	for i := range decoys {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bot-%03d", i), Namespace: ns, Labels: naming.SelectorLabels(rt.Name)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: naming.ContainerSvc, Image: "x",
				Env: []corev1.EnvVar{{Name: "PAD", Value: strings.Repeat("p", pad)}}}}},
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if i == 29 { // one with trouble, past the first pages
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available"}}
			if err := c.Status().Update(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	pc := &pageCounter{Reader: c}
	r := &MemoryRuntimeReconciler{reader: pc}
	msg, err := r.podTrouble(ctx, rt)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "pod bot-029 cannot be scheduled") {
		t.Errorf("podTrouble = %q, want the trouble of bot-029", msg)
	}
	t.Logf("%d labelled pods of %d KB: %d list calls, at most %d pods a call", decoys, pad/1000, pc.calls, pc.largest)
	if pc.largest > podPage || pc.calls != 30/podPage+1 {
		t.Errorf("read %d calls of up to %d pods, want %d calls of at most %d (it stops at the trouble)", pc.calls, pc.largest, 30/podPage+1, podPage)
	}

	// A runtime without pods: one call.
	pc = &pageCounter{Reader: c}
	r = &MemoryRuntimeReconciler{reader: pc}
	other := &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Name: "none", Namespace: ns}}
	if msg, err := r.podTrouble(ctx, other); err != nil || msg != "" || pc.calls != 1 {
		t.Errorf("a runtime without pods: %q, %v, %d calls", msg, err, pc.calls)
	}
}
