package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/engram-dev/engram/internal/memory"
)

// The secrets part (--parts=secrets, not in the default parts) measures
// what Secrets that have nothing to do with Engram cost the operator: its
// resident memory on an empty cluster and on a cluster holding
// secretsCount Secrets of secretBytes each, the operator started afresh
// each time (so the figure is the cost after its caches synced, not of a
// watch that grew). Issue 12, point 6: the operator used to cache every
// Secret of the cluster.
const (
	secretsCount      = 1000
	secretBytes       = 8 << 10
	secretNamespaces  = 10
	secretsStarts     = 3                // operator starts per state; the median is reported
	secretsSettleTime = 15 * time.Second // after /readyz, before reading VmRSS
)

// SecretsReport is the secrets part of the results.
type SecretsReport struct {
	Secrets     int    `json:"secrets"`
	SecretBytes int    `json:"secretBytes"`
	Namespaces  int    `json:"namespaces"`
	Process     string `json:"process"`
	// RSS (VmRSS) after the settle time, and peak (VmHWM), per start, in MiB.
	EmptyRSSMiB       []float64 `json:"emptyRssMiB"`
	EmptyPeakMiB      []float64 `json:"emptyPeakMiB"`
	WithSecretsRSSMiB []float64 `json:"withSecretsRssMiB"`
	WithSecretsPeak   []float64 `json:"withSecretsPeakMiB"`
	// Medians, and what the Secrets cost (with - empty).
	EmptyMedianMiB       float64 `json:"emptyMedianMiB"`
	WithSecretsMedianMiB float64 `json:"withSecretsMedianMiB"`
	CostMiB              float64 `json:"costMiB"`
	PeakCostMiB          float64 `json:"peakCostMiB"`
}

// runSecrets starts the operator binary (--manager) on an empty envtest
// control plane, then again after creating the Secrets, and reads its memory.
func (h *harness) runSecrets(ctx context.Context) (*SecretsReport, error) {
	rep := &SecretsReport{Secrets: secretsCount, SecretBytes: secretBytes, Namespaces: secretNamespaces,
		Process: fmt.Sprintf("%s as a separate process, no MemoryRuntime; VmRSS %s after /readyz, VmHWM; %d starts per state",
			h.managerBin, secretsSettleTime, secretsStarts)}
	env, _, c, err := h.controlPlane()
	if err != nil {
		return nil, err
	}
	defer h.cleanup("control plane", func() error { return stopControlPlane(env) })
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", operatorNamespace, err)
	}

	for range secretsStarts {
		rss, peak, err := h.operatorMemory(ctx, env)
		if err != nil {
			return nil, err
		}
		rep.EmptyRSSMiB, rep.EmptyPeakMiB = append(rep.EmptyRSSMiB, rss), append(rep.EmptyPeakMiB, peak)
	}
	h.logf("secrets: operator RSS without Secrets %v MiB", rep.EmptyRSSMiB)

	start := time.Now()
	if err := createSecrets(ctx, c); err != nil {
		return nil, err
	}
	h.logf("secrets: created %d Secrets of %d KiB in %.1f s", secretsCount, secretBytes>>10, time.Since(start).Seconds())

	for range secretsStarts {
		rss, peak, err := h.operatorMemory(ctx, env)
		if err != nil {
			return nil, err
		}
		rep.WithSecretsRSSMiB, rep.WithSecretsPeak = append(rep.WithSecretsRSSMiB, rss), append(rep.WithSecretsPeak, peak)
	}
	rep.EmptyMedianMiB, rep.WithSecretsMedianMiB = median(rep.EmptyRSSMiB), median(rep.WithSecretsRSSMiB)
	rep.CostMiB = round3(rep.WithSecretsMedianMiB - rep.EmptyMedianMiB)
	rep.PeakCostMiB = round3(median(rep.WithSecretsPeak) - median(rep.EmptyPeakMiB))
	h.logf("secrets: operator RSS with %d Secrets %v MiB: the Secrets cost %.1f MiB (peak %.1f MiB)",
		secretsCount, rep.WithSecretsRSSMiB, rep.CostMiB, rep.PeakCostMiB)
	return rep, nil
}

// operatorMemory starts the operator, waits until it is ready plus the
// settle time, reads its VmRSS and VmHWM in MiB, and stops it.
func (h *harness) operatorMemory(ctx context.Context, env *envtest.Environment) (rss, peak float64, err error) {
	op, _, err := h.startOperator(ctx, env)
	if err != nil {
		return 0, 0, err
	}
	defer op.stop(30 * time.Second)
	if err := memory.Sleep(ctx, secretsSettleTime); err != nil {
		return 0, 0, err
	}
	if err := op.exited(); err != nil {
		return 0, 0, err
	}
	p, cur, err := memoryKiB(op.pid())
	if err != nil {
		return 0, 0, err
	}
	return round3(float64(cur) / 1024), round3(float64(p) / 1024), nil
}

// createSecrets creates the unrelated Secrets (random, incompressible data)
// in secretNamespaces namespaces, with a few parallel clients.
func createSecrets(ctx context.Context, c client.Client) error {
	for i := range secretNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%d", i)}}
		if err := c.Create(ctx, ns); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns.Name, err)
		}
	}
	return inParallel(secretsCount, func(i int) error {
		data := make([]byte, secretBytes)
		_, _ = rand.Read(data)
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("unrelated-%d", i%secretNamespaces), Name: fmt.Sprintf("app-secret-%04d", i)},
			Data:       map[string][]byte{"blob": data},
		}
		if err := c.Create(ctx, s); err != nil {
			return fmt.Errorf("creating Secret %s/%s: %w", s.Namespace, s.Name, err)
		}
		return nil
	})
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return round3((s[len(s)/2-1] + s[len(s)/2]) / 2)
}

func secretsMarkdown(p printer, s *SecretsReport) {
	p("## Operator memory with unrelated Secrets (envtest kube-apiserver + etcd)\n\n")
	p("%s. %d Secrets of %d KiB (random data) in %d namespaces, none of them Engram's.\n\n", s.Process, s.Secrets, s.SecretBytes>>10, s.Namespaces)
	p("| state | RSS per start (MiB) | median RSS | peak (VmHWM) per start |\n|---|---|---|---|\n")
	p("| empty cluster | %v | %.1f MiB | %v |\n", s.EmptyRSSMiB, s.EmptyMedianMiB, s.EmptyPeakMiB)
	p("| with the Secrets | %v | %.1f MiB | %v |\n", s.WithSecretsRSSMiB, s.WithSecretsMedianMiB, s.WithSecretsPeak)
	p("\nWhat the Secrets cost the operator: **%.1f MiB** RSS (median), %.1f MiB peak.\n\n", s.CostMiB, s.PeakCostMiB)
}
