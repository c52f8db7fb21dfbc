package controller

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The memo of stubs read whole keeps at most stubMemoEntries entries,
// whatever number of objects pass through it: past it the oldest goes.
func TestStubMemoStaysWithinItsBound(t *testing.T) {
	var m stubMemo
	const objects = 3 * stubMemoEntries
	for i := range objects {
		m.remember(types.UID(fmt.Sprint("uid-", i)), "1", "h", nil)
		// An object seen again at a new version takes no second entry.
		m.remember(types.UID(fmt.Sprint("uid-", i)), "2", "h", nil)
	}
	if n := m.len(); n != stubMemoEntries {
		t.Fatalf("%d entries after %d objects, want %d", n, objects, stubMemoEntries)
	}
	if len(m.order) != stubMemoEntries {
		t.Fatalf("the order holds %d keys, want %d", len(m.order), stubMemoEntries)
	}
	if _, ok := m.recall("uid-0", "2", "h"); ok {
		t.Error("the oldest entry is still there")
	}
	last := types.UID(fmt.Sprint("uid-", objects-1))
	if _, ok := m.recall(last, "2", "h"); !ok {
		t.Error("the newest entry is gone")
	}
	if _, ok := m.recall(last, "1", "h"); ok {
		t.Error("an old version is recalled")
	}
	if _, ok := m.recall(last, "2", "other"); ok {
		t.Error("another want is recalled")
	}
	m.remember("uid-x", "1", "", nil)
	if _, ok := m.recall("uid-x", "1", ""); ok {
		t.Error("an empty hash is remembered")
	}
}

// A status over maxMemoStatus is not remembered; a kept one is a copy.
func TestStatusOnlyIsBoundedAndCopied(t *testing.T) {
	d := &appsv1.Deployment{Status: appsv1.DeploymentStatus{AvailableReplicas: 2, Conditions: []appsv1.DeploymentCondition{{Message: "ok"}}}}
	kept, ok := statusOnly(d)
	if !ok {
		t.Fatal("a small status is not kept")
	}
	d.Status.Conditions[0].Message = "changed"
	got := kept.(*appsv1.Deployment)
	if got.Status.AvailableReplicas != 2 || got.Status.Conditions[0].Message != "ok" || got.Name != "" || got.Spec.Replicas != nil {
		t.Fatalf("kept %+v", got)
	}
	d.Status.Conditions[0].Message = string(make([]byte, maxMemoStatus))
	if _, ok := statusOnly(d); ok {
		t.Error("a status over the bound is kept")
	}
}
