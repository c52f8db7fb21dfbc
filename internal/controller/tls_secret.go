package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// checkTLSSecret stops the reconcile, before the Deployment is changed,
// while spec.service.tls names a Secret that is missing or holds no usable
// certificate and key: pods started with it could only fail to serve (or
// wait forever for the volume), so the running ones are left as they are
// and the condition says what to fix. The Secret is watched (its name is
// in indexSecretRefs), so creating or fixing it reconciles at once. Its
// content is not part of the pod template hash: the service reloads a
// renewed certificate by itself.
func (r *MemoryRuntimeReconciler) checkTLSSecret(ctx context.Context, s *runtimeScope) (bool, error) {
	rt := s.rt
	name := rt.TLSSecretName()
	if name == "" {
		return false, nil
	}
	var sec corev1.Secret
	if stop, err := getOrBlock(ctx, r.secrets, s, "Secret", name, &sec, memoryv1alpha1.ReasonSecretNotFound, fmt.Sprintf(
		"spec.service.tls.secretName: Secret %q does not exist in namespace %q (with cert-manager: is the Certificate issued?); the service is not changed until it does", name, rt.Namespace)); stop || err != nil {
		return stop, err
	}
	if err := ValidateTLSSecret(&sec, time.Now()); err != nil {
		s.facts.block(memoryv1alpha1.ConditionReady, memoryv1alpha1.ReasonTLSSecretInvalid, fmt.Sprintf(
			"spec.service.tls.secretName: Secret %q: %v%s; the service is not changed until it is fixed", name, err, overBoundNote(&sec)))
		return true, nil
	}
	return false, nil
}

// ValidateTLSSecret checks that a Secret holds what the service needs to
// serve HTTPS: PEM in tls.crt (the certificate first, then its chain) and
// the matching private key in tls.key, with the certificate not expired.
func ValidateTLSSecret(sec *corev1.Secret, now time.Time) error {
	crt, key := sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey]
	switch {
	case len(crt) == 0 && len(key) == 0:
		return fmt.Errorf("it has no %s and no %s (a kubernetes.io/tls Secret has both)", corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	case len(crt) == 0:
		return fmt.Errorf("it has no %s", corev1.TLSCertKey)
	case len(key) == 0:
		return fmt.Errorf("it has no %s", corev1.TLSPrivateKeyKey)
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		// The standard library's message says which part is wrong (no
		// PEM block, a key that does not match the certificate, ...).
		return fmt.Errorf("%s and %s are not a usable certificate and key: %w", corev1.TLSCertKey, corev1.TLSPrivateKeyKey, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("parsing the certificate of %s: %w", corev1.TLSCertKey, err)
	}
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("its certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}
