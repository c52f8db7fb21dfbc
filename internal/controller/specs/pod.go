package specs

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// NonRootUID is the uid (and gid) of distroless' "nonroot" user.
const NonRootUID int64 = 65532

// Pieces shared by the memory service pods and the maintenance job pods.

// podSecurityContext runs as distroless' nonroot user with the runtime's
// default seccomp profile (the "restricted" Pod Security Standard).
func podSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(NonRootUID),
		RunAsGroup:     ptr.To(NonRootUID),
		FSGroup:        ptr.To(NonRootUID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerSecurityContext: no privilege escalation, no capability, a
// read-only root filesystem.
func containerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// tenantEnv is the environment of service and job containers: the login
// role's URL and the API keys, all from Secrets.
func tenantEnv(rt *memoryv1alpha1.MemoryRuntime) []corev1.EnvVar {
	env := []corev1.EnvVar{secretEnv(naming.EnvDatabaseURL, naming.CredentialsSecretName(rt.Name), naming.KeyURI)}
	if ref := rt.Spec.Embedding.APIKeySecretRef; ref != nil {
		env = append(env, secretEnv(naming.EnvEmbeddingAPIKey, ref.Name, ref.KeyOr(memoryv1alpha1.DefaultAPIKeyKey)))
	}
	if rt.Spec.LLM != nil && rt.Spec.LLM.APIKeySecretRef != nil {
		ref := rt.Spec.LLM.APIKeySecretRef
		env = append(env, secretEnv(naming.EnvLLMAPIKey, ref.Name, ref.KeyOr(memoryv1alpha1.DefaultAPIKeyKey)))
	}
	return env
}

// RerankKeyEnv is the service's variable of a policy's reranker key (none
// when ref is nil). Only the service searches: the jobs never get it.
func RerankKeyEnv(ref *memoryv1alpha1.SecretKeySelector) []corev1.EnvVar {
	if ref == nil {
		return nil
	}
	return []corev1.EnvVar{secretEnv(naming.EnvRerankAPIKey, ref.Name, ref.KeyOr(memoryv1alpha1.DefaultAPIKeyKey))}
}

// ReembedKeyEnv is the service's variable of the key of the embedder a
// re-embed fills toward (none when ref is nil): the config's reembed.next.
func ReembedKeyEnv(ref *memoryv1alpha1.SecretKeySelector) []corev1.EnvVar {
	if ref == nil {
		return nil
	}
	return []corev1.EnvVar{secretEnv(naming.EnvReembedEmbeddingAPIKey, ref.Name, ref.KeyOr(memoryv1alpha1.DefaultAPIKeyKey))}
}

func secretEnv(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret},
		Key:                  key,
	}}}
}

// Volume names.
const (
	volumeConfig = "config"
	volumeTokens = "tokens"
	volumeTmp    = "tmp"
	volumeTLS    = "tls"
)

// tlsKeyMode lets the pod's group (fsGroup, the service's own gid) read the
// TLS Secret's files: the key is readable by no other user.
const tlsKeyMode int32 = 0o440

// tlsVolume mounts spec.service.tls's Secret (tls.crt, tls.key).
func tlsVolume(secret string) corev1.Volume {
	return corev1.Volume{Name: volumeTLS, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr.To(tlsKeyMode)},
	}}
}

func configVolume(rt *memoryv1alpha1.MemoryRuntime) corev1.Volume {
	return corev1.Volume{Name: volumeConfig, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: naming.ConfigMapName(rt.Name)}},
	}}
}

// tmpVolume gives the read-only root filesystem a small writable /tmp.
func tmpVolume() corev1.Volume {
	return corev1.Volume{Name: volumeTmp, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(tmpSizeLimit)},
	}}
}

func mount(name, path string) corev1.VolumeMount {
	return corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: name != volumeTmp}
}

// Image returns the image of a runtime's service and jobs: spec.service.image,
// else the operator's own (fallback).
func Image(rt *memoryv1alpha1.MemoryRuntime, fallback string) string {
	if rt.Spec.Service.Image != "" {
		return rt.Spec.Service.Image
	}
	return fallback
}
