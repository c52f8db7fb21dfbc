package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/engram-dev/engram/internal/naming"
)

// The operator must not hold every Secret of the cluster in memory: that
// costs memory in proportion to the cluster, not to Engram, and puts every
// team's credentials in one process. So:
//
//   - the manager's cache holds only Engram's own Secrets (label
//     app.kubernetes.io/managed-by=engram-operator, see CacheOptions);
//   - the Secrets users name (spec.database.connectionSecretRef, the
//     clusterConnection Secrets of the operator's namespace, the
//     apiKeySecretRefs) are read from the API server by secretReader;
//   - changes to those Secrets still trigger reconciles, through a
//     metadata-only watch (PartialObjectMetadata) in a cache of its own: it
//     keeps name, namespace, resourceVersion and the clusterConnection label
//     of each Secret, never its data, its other labels or its annotations
//     (where kubectl apply keeps a copy of the data).
//
// The manager's cache cannot do both: its settings (the label selector)
// apply per kind, to typed and metadata informers alike.

// secretMetadata is an empty metadata-only Secret, to read from or watch
// the metadata cache.
func secretMetadata() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// keepIdentityOnly is the transform of the metadata cache: it keeps what the
// watch's mapping (runtimesOfSecret), the clusterConnection label lookup
// and secretReader need, and drops the rest before it is stored. Of the
// labels it keeps only the clusterConnection one: this cache covers every
// Secret the operator may see, and whoever can create a Secret there can
// give it about a megabyte of labels, which the operator would otherwise
// keep for as long as the Secret exists.
func keepIdentityOnly(in any) (any, error) {
	m, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil
	}
	m.ObjectMeta = metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Labels:            connectionLabelOnly(m.Labels),
		DeletionTimestamp: m.DeletionTimestamp,
	}
	return m, nil
}

// connectionLabelOnly keeps the one label the operator reads from the
// metadata cache (a label value is at most 63 bytes), or nil.
func connectionLabelOnly(l map[string]string) map[string]string {
	v, ok := l[naming.LabelConnection]
	if !ok {
		return nil
	}
	return map[string]string{naming.LabelConnection: v}
}

// secretMetadataCache is the metadata-only Secret cache. GetCache makes the
// manager start it with its other caches and wait for it to sync before the
// controllers start.
type secretMetadataCache struct{ cache.Cache }

func (c secretMetadataCache) GetCache() cache.Cache { return c.Cache }

// newSecretMetadataCache creates the metadata-only Secret cache over the
// namespaces the operator reads Secrets from (with WatchNamespaces: those
// and the operator's own, for clusterConnection; else all) and adds it to mgr.
func newSecretMetadataCache(mgr manager.Manager, o Options) (cache.Cache, error) {
	opts := cache.Options{
		HTTPClient:       mgr.GetHTTPClient(),
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		DefaultTransform: keepIdentityOnly,
	}
	if len(o.WatchNamespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.WatchNamespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
		if o.OperatorNamespace != "" {
			opts.DefaultNamespaces[o.OperatorNamespace] = cache.Config{}
		}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, fmt.Errorf("creating the Secret metadata cache: %w", err)
	}
	if err := mgr.Add(secretMetadataCache{c}); err != nil {
		return nil, fmt.Errorf("adding the Secret metadata cache: %w", err)
	}
	return c, nil
}

// secretReader reads the Secrets users name, as a client.Reader of Secrets
// (Get and List of *corev1.Secret only). Existence and labels come from the
// metadata cache (no request); the data from the API server, remembered per
// resourceVersion, so a Secret is read again only after it changed: a
// reconcile of a runtime whose Secrets did not change costs no request.
// Only Secrets a runtime actually reads are remembered, and an entry nobody
// read for maxIdle is forgotten.
type secretReader struct {
	meta    cache.Cache   // metadata-only Secrets (newSecretMetadataCache)
	api     client.Reader // the API server
	maxIdle time.Duration

	mu    sync.Mutex
	known map[client.ObjectKey]knownSecret
}

type knownSecret struct {
	secret *corev1.Secret // what keptOfSecret keeps of it, at secret.ResourceVersion
	usedAt time.Time
}

func newSecretReader(meta cache.Cache, api client.Reader, maxIdle time.Duration) *secretReader {
	return &secretReader{meta: meta, api: api, maxIdle: maxIdle, known: map[client.ObjectKey]knownSecret{}}
}

// Get reads one Secret. NotFound when the metadata cache has no such Secret.
func (r *secretReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	out, ok := obj.(*corev1.Secret)
	if !ok {
		return fmt.Errorf("the Secret reader reads Secrets only, not %T", obj)
	}
	m := secretMetadata()
	if err := r.meta.Get(ctx, key, m); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(key)
		}
		return err
	}
	if s := r.lookup(key, m.ResourceVersion); s != nil {
		s.DeepCopyInto(out)
		return nil
	}
	var fresh corev1.Secret
	if err := r.api.Get(ctx, key, &fresh); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(key)
		}
		return err
	}
	kept := keptOfSecret(&fresh)
	r.remember(key, kept)
	kept.DeepCopyInto(out)
	return nil
}

// The operator reads a connection URL (at most 4 KiB, tenant.MaxTenantURLBytes),
// API keys, a TLS certificate and key, and the few small keys of a
// CloudNativePG Secret. A Secret a runtime names may hold up to 1 MiB, and
// the reader remembers it for two grant-check intervals: it keeps only what
// fits these bounds, in key order. A value over them reads as absent (the
// runtime's condition names the key and says it is too big), the same at
// every read.
const (
	maxSecretValueBytes = 16 << 10 // a TLS chain with its intermediates fits
	maxSecretKeptBytes  = 64 << 10 // all the values kept of one Secret
	// maxOverBoundNamed keys over the bounds are named on the kept copy
	// (a Secret key is at most 253 bytes), the others only counted.
	maxOverBoundNamed = 4
)

// keptOfSecret is what the reader keeps of s and hands out: its identity,
// its type, the clusterConnection label and the values within the bounds
// above, never its annotations (kubectl apply copies the data there) or its
// other labels.
func keptOfSecret(s *corev1.Secret) *corev1.Secret {
	kept := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
			CreationTimestamp: s.CreationTimestamp, DeletionTimestamp: s.DeletionTimestamp,
			Labels: connectionLabelOnly(s.Labels),
		},
		Type: s.Type,
	}
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	total := 0
	var over []string
	for _, k := range keys {
		v := s.Data[k]
		if len(v) > maxSecretValueBytes || total+len(k)+len(v) > maxSecretKeptBytes {
			over = append(over, k)
			continue
		}
		if kept.Data == nil {
			kept.Data = map[string][]byte{}
		}
		kept.Data[k] = v
		total += len(k) + len(v)
	}
	if len(over) > maxOverBoundNamed {
		over = over[:maxOverBoundNamed]
	}
	if len(over) > 0 {
		kept.Annotations = map[string]string{naming.AnnotationValuesOverBound: strings.Join(over, ",")}
	}
	return kept
}

// overBoundNote names the keys of s whose values the Secret reader did not
// keep for their size ("" when there are none), to add to a condition that
// finds a key missing or a value unusable: "too big" is then the reason.
func overBoundNote(s *corev1.Secret) string {
	over := s.Annotations[naming.AnnotationValuesOverBound]
	if over == "" {
		return ""
	}
	return fmt.Sprintf(" (the values of key(s) %s are too big and read as absent: the operator reads at most %d KiB a value and %d KiB a Secret)",
		over, maxSecretValueBytes>>10, maxSecretKeptBytes>>10)
}

// List lists Secrets (namespace and label selector options, as the cache
// takes them) from the metadata cache and reads each with Get.
func (r *secretReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	out, ok := list.(*corev1.SecretList)
	if !ok {
		return fmt.Errorf("the Secret reader lists Secrets only, not %T", list)
	}
	metas := &metav1.PartialObjectMetadataList{}
	metas.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := r.meta.List(ctx, metas, opts...); err != nil {
		return err
	}
	out.Items = make([]corev1.Secret, 0, len(metas.Items))
	for i := range metas.Items {
		var s corev1.Secret
		err := r.Get(ctx, client.ObjectKeyFromObject(&metas.Items[i]), &s)
		if apierrors.IsNotFound(err) {
			continue // deleted since the cache listed it
		}
		if err != nil {
			return err
		}
		out.Items = append(out.Items, s)
	}
	return nil
}

func (r *secretReader) lookup(key client.ObjectKey, rv string) *corev1.Secret {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.known[key]
	if !ok || k.secret.ResourceVersion != rv {
		return nil
	}
	k.usedAt = time.Now()
	r.known[key] = k
	return k.secret
}

func (r *secretReader) remember(key client.ObjectKey, s *corev1.Secret) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for k, v := range r.known {
		if now.Sub(v.usedAt) > r.maxIdle {
			delete(r.known, k)
		}
	}
	r.known[key] = knownSecret{secret: s, usedAt: now}
}

func (r *secretReader) forget(key client.ObjectKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.known, key)
}
