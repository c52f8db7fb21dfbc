package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Pods are read from the API server, uncached (the operator does not watch
// Pods), by labels anyone who may create Pods in the namespace can set, and
// a Pod may be about 1.5 MiB: a team's decoy Pods made one look of a
// runtime hold 90 MiB at once (issue 26's fourteenth review, MEDIUM 1).
// A look reads them a few at a time and stops early.
const (
	// podPage is how many Pods one list call reads.
	podPage = 4
	// maxPodPages bounds a look: 128 Pods, more than a runtime's 100
	// replicas and a Job's retries. Pods past them are not looked at; a
	// team that fills its namespace with decoys hides only its own
	// runtime's trouble.
	maxPodPages = 32
)

// visitPods calls visit for each Pod of namespace ns that sel matches, in
// the API server's order (by name), podPage at a time, until visit
// returns false or maxPodPages were read.
func visitPods(ctx context.Context, reader client.Reader, ns string, sel labels.Selector, visit func(*corev1.Pod) bool) error {
	cont := ""
	for range maxPodPages {
		var page corev1.PodList
		opts := []client.ListOption{client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}, client.Limit(podPage)}
		if cont != "" {
			opts = append(opts, client.Continue(cont))
		}
		if err := reader.List(ctx, &page, opts...); err != nil {
			return fmt.Errorf("listing pods: %w", err)
		}
		for i := range page.Items {
			if !visit(&page.Items[i]) {
				return nil
			}
		}
		if cont = page.Continue; cont == "" {
			return nil
		}
	}
	return nil
}
