// Package v1alpha1 holds the Engram API: MemoryRuntime, MemoryPolicy,
// RetentionJob and (cluster-scoped) MemoryDatabase in group memory.engram.dev.
//
// +kubebuilder:object:generate=true
// +groupName=memory.engram.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "memory.engram.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a scheme. It
	// uses apimachinery only, so importing the API pulls in no controller code.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&MemoryRuntime{}, &MemoryRuntimeList{},
		&MemoryPolicy{}, &MemoryPolicyList{},
		&RetentionJob{}, &RetentionJobList{},
		&MemoryDatabase{}, &MemoryDatabaseList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
