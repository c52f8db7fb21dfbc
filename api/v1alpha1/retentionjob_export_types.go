package v1alpha1

// ExportSpec is the destination of a RetentionJob's export operation:
// exactly one of a PersistentVolumeClaim or an S3-compatible bucket.
// +kubebuilder:validation:XValidation:rule="has(self.pvc) != has(self.s3)",message="spec.export needs exactly one destination: set either pvc or s3"
type ExportSpec struct {
	// Vectors includes each memory's embedding in the export (as
	// GET /v1/export?vectors=true): larger files, but an import into a
	// runtime with the same embedder does not embed again.
	// +optional
	Vectors bool `json:"vectors,omitempty"`

	// PVC writes the export as a file on a PersistentVolumeClaim in the
	// RetentionJob's namespace, mounted into the job's pod.
	// +optional
	PVC *ExportPVC `json:"pvc,omitempty"`

	// S3 uploads the export to a bucket of an S3-compatible object store.
	// +optional
	S3 *ExportS3 `json:"s3,omitempty"`
}

// ExportPVC is a PersistentVolumeClaim an export is written to. Each run
// writes <schema>-<UTC time>.jsonl, under a temporary name first and
// renamed when complete; nothing older is removed.
type ExportPVC struct {
	// ClaimName of the PersistentVolumeClaim, in the RetentionJob's
	// namespace. It must allow a writer on the node the job runs on
	// (ReadWriteOnce claims in use by another pod on another node block the job).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="spec.export.pvc.claimName must be a Kubernetes object name (lower-case letters, digits, '-' and '.')"
	ClaimName string `json:"claimName"`

	// SubPath is a directory within the claim the files go to (the
	// claim's root when empty); it must exist on the volume.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="spec.export.pvc.subPath must be a relative path without '..'"
	SubPath string `json:"subPath,omitempty"`
}

// ExportS3 is a bucket of an S3-compatible object store (AWS S3, Ceph
// RGW, Cloudflare R2, SeaweedFS, ...). Each run uploads
// <prefix><schema>-<UTC time>.jsonl with a multipart upload that is
// completed only when the whole export is written, so an object under
// that name is always a complete export.
type ExportS3 struct {
	// Endpoint is the URL of the S3 API, e.g. https://s3.eu-west-1.amazonaws.com.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#@[:space:]]+(/[^?#[:space:]]*)?$')",message="spec.export.s3.endpoint must be an http:// or https:// URL without credentials, query or fragment, e.g. https://s3.eu-west-1.amazonaws.com"
	Endpoint string `json:"endpoint"`

	// Bucket name (3 to 63 lower-case letters, digits, '.' and '-').
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9.-]*[a-z0-9]$')",message="spec.export.s3.bucket must be an S3 bucket name: 3 to 63 lower-case letters, digits, '.' and '-'"
	Bucket string `json:"bucket"`

	// Prefix put before each object's name, e.g. "engram/team-a/" (give
	// the trailing slash yourself if you want a folder).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.contains('//')",message="spec.export.s3.prefix must not start with '/' nor hold '//'"
	Prefix string `json:"prefix,omitempty"`

	// Region the requests are signed for. Default us-east-1, which most
	// S3-compatible stores accept.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9-]+$')",message="spec.export.s3.region must be a region name such as eu-west-1"
	Region string `json:"region,omitempty"`

	// UsePathStyle addresses the bucket in the path (endpoint/bucket/key)
	// instead of the host name (bucket.endpoint/key); most self-hosted
	// stores need it.
	// +optional
	UsePathStyle bool `json:"usePathStyle,omitempty"`

	// CredentialsSecretRef names a Secret in the RetentionJob's namespace
	// holding the access key. Its values reach the job as environment
	// variables; they are never logged nor written to status.
	CredentialsSecretRef S3CredentialsSecretRef `json:"credentialsSecretRef"`
}

// S3CredentialsSecretRef is a Secret holding an S3 access key.
type S3CredentialsSecretRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// AccessKeyIDKey is the Secret's key holding the access key id. Default accessKeyId.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="accessKeyIdKey must be a Secret key (letters, digits, '-', '_' and '.')"
	AccessKeyIDKey string `json:"accessKeyIdKey,omitempty"`
	// SecretAccessKeyKey is the Secret's key holding the secret access key. Default secretAccessKey.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="secretAccessKeyKey must be a Secret key (letters, digits, '-', '_' and '.')"
	SecretAccessKeyKey string `json:"secretAccessKeyKey,omitempty"`
}

// Default keys of an S3 credentials Secret.
const (
	DefaultAccessKeyIDKey     = "accessKeyId"
	DefaultSecretAccessKeyKey = "secretAccessKey"
)

// AccessKeyIDKeyOrDefault is the key of the access key id.
func (r S3CredentialsSecretRef) AccessKeyIDKeyOrDefault() string {
	if r.AccessKeyIDKey == "" {
		return DefaultAccessKeyIDKey
	}
	return r.AccessKeyIDKey
}

// SecretAccessKeyKeyOrDefault is the key of the secret access key.
func (r S3CredentialsSecretRef) SecretAccessKeyKeyOrDefault() string {
	if r.SecretAccessKeyKey == "" {
		return DefaultSecretAccessKeyKey
	}
	return r.SecretAccessKeyKey
}
