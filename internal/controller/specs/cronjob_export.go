package specs

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
)

// volumeExport is the job's mount of spec.export.pvc.
const volumeExport = "export"

// exportSpec is spec.export when the job runs the export operation (the
// CRD refuses one without the other; nil otherwise).
func exportSpec(rj *memoryv1alpha1.RetentionJob) *memoryv1alpha1.ExportSpec {
	if rj.Spec.Export == nil || !slices.Contains(rj.Spec.Operations, memoryv1alpha1.OperationExport) {
		return nil
	}
	return rj.Spec.Export
}

// exportArgs are the job's --export-* flags: where to write. The S3
// access key is not among them: it comes from the Secret as environment
// (exportEnv), so it is in no object's spec and no process list.
func exportArgs(rj *memoryv1alpha1.RetentionJob) []string {
	ex := exportSpec(rj)
	if ex == nil {
		return nil
	}
	var args []string
	if ex.Vectors {
		args = append(args, "--export-vectors")
	}
	switch {
	case ex.PVC != nil:
		args = append(args, "--export-dir="+naming.ExportDir, "--export-pvc-claim="+ex.PVC.ClaimName)
		if ex.PVC.SubPath != "" {
			args = append(args, "--export-pvc-subpath="+ex.PVC.SubPath)
		}
	case ex.S3 != nil:
		args = append(args, "--export-s3-endpoint="+ex.S3.Endpoint, "--export-s3-bucket="+ex.S3.Bucket)
		if ex.S3.Prefix != "" {
			args = append(args, "--export-s3-prefix="+ex.S3.Prefix)
		}
		if ex.S3.Region != "" {
			args = append(args, "--export-s3-region="+ex.S3.Region)
		}
		if ex.S3.UsePathStyle {
			args = append(args, "--export-s3-path-style")
		}
	}
	return args
}

// exportEnv passes the S3 access key from its Secret (secretKeyRef).
func exportEnv(rj *memoryv1alpha1.RetentionJob) []corev1.EnvVar {
	ex := exportSpec(rj)
	if ex == nil || ex.S3 == nil {
		return nil
	}
	ref := ex.S3.CredentialsSecretRef
	return []corev1.EnvVar{
		secretEnv(naming.EnvExportS3AccessKeyID, ref.Name, ref.AccessKeyIDKeyOrDefault()),
		secretEnv(naming.EnvExportS3SecretAccessKey, ref.Name, ref.SecretAccessKeyKeyOrDefault()),
	}
}

// withExportVolume mounts spec.export.pvc (its subPath) at naming.ExportDir.
func withExportVolume(rj *memoryv1alpha1.RetentionJob, pod *corev1.PodSpec) {
	ex := exportSpec(rj)
	if ex == nil || ex.PVC == nil {
		return
	}
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: volumeExport, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ex.PVC.ClaimName},
	}})
	c := &pod.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volumeExport, MountPath: naming.ExportDir, SubPath: ex.PVC.SubPath})
}
