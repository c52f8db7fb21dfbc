package controller

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/controller/specs"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
)

// exportingJob is testRetentionJob with the export operation to dest.
func exportingJob(dest *memoryv1alpha1.ExportSpec) *memoryv1alpha1.RetentionJob {
	rj := testRetentionJob()
	rj.Spec.DryRun = false
	rj.Spec.Operations = append(rj.Spec.Operations, memoryv1alpha1.OperationExport)
	rj.Spec.Export = dest
	return rj
}

func jobContainer(cj *batchv1.CronJob) corev1.Container {
	return cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
}

// TestCronJobExportsToS3: the job gets the bucket as flags and the access
// key from the named Secret as secretKeyRef environment, never as a value.
func TestCronJobExportsToS3(t *testing.T) {
	rj := exportingJob(&memoryv1alpha1.ExportSpec{Vectors: true, S3: &memoryv1alpha1.ExportS3{
		Endpoint: "https://s3.example", Bucket: "backups", Prefix: "engram/", Region: "eu-west-1", UsePathStyle: true,
		CredentialsSecretRef: memoryv1alpha1.S3CredentialsSecretRef{Name: "s3-backup", SecretAccessKeyKey: "secret"},
	}})
	c := jobContainer(specs.CronJob(rj, testRuntime(), "img:1"))
	cmd := strings.Join(c.Command, " ")
	for _, want := range []string{"--ops=decay,purge,compact,export", "--export-vectors", "--export-s3-endpoint=https://s3.example",
		"--export-s3-bucket=backups", "--export-s3-prefix=engram/", "--export-s3-region=eu-west-1", "--export-s3-path-style"} {
		if !slices.Contains(c.Command, want) && !strings.Contains(cmd, want) {
			t.Errorf("command %q lacks %s", cmd, want)
		}
	}
	keys := map[string]string{}
	for _, e := range c.Env {
		if e.Value != "" {
			t.Errorf("env %s carries a value; every secret comes by secretKeyRef", e.Name)
		}
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "s3-backup" {
			keys[e.Name] = e.ValueFrom.SecretKeyRef.Key
		}
	}
	if keys[naming.EnvExportS3AccessKeyID] != memoryv1alpha1.DefaultAccessKeyIDKey || keys[naming.EnvExportS3SecretAccessKey] != "secret" {
		t.Errorf("S3 key env = %v", keys)
	}
}

// TestCronJobExportsToAPVC: the claim is mounted writable at the export
// directory, at its subPath, and the job is told where.
func TestCronJobExportsToAPVC(t *testing.T) {
	rj := exportingJob(&memoryv1alpha1.ExportSpec{PVC: &memoryv1alpha1.ExportPVC{ClaimName: "backups", SubPath: "engram/team-a"}})
	cj := specs.CronJob(rj, testRuntime(), "img:1")
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	var claim string
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	if claim != "backups" {
		t.Fatalf("volumes %+v: want the claim backups", pod.Volumes)
	}
	c := jobContainer(cj)
	var m *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == naming.ExportDir {
			m = &c.VolumeMounts[i]
		}
	}
	if m == nil || m.ReadOnly || m.SubPath != "engram/team-a" {
		t.Fatalf("mounts %+v: want the claim writable at %s, subPath engram/team-a", c.VolumeMounts, naming.ExportDir)
	}
	for _, want := range []string{"--export-dir=" + naming.ExportDir, "--export-pvc-claim=backups", "--export-pvc-subpath=engram/team-a"} {
		if !slices.Contains(c.Command, want) {
			t.Errorf("command %q lacks %s", c.Command, want)
		}
	}
}

// TestLastRunCarriesTheExport: status.lastRun names the file, its size
// and counts; values over the CRD's bounds are dropped, not patched.
func TestLastRunCarriesTheExport(t *testing.T) {
	s := &memory.JobSummary{Result: memory.RunSucceeded, Operations: []memory.JobSummaryOp{{Name: memory.OpExport, Scanned: 3,
		Export: &memory.JobExport{Location: "s3://b/k.jsonl", Bytes: 42, Records: map[string]int64{"memory": 3}, SHA256: strings.Repeat("a", 64)}}}}
	run := LastRunFromSummary("j", "bot", s, true)
	if len(run.Operations) != 1 || run.Operations[0].Export == nil {
		t.Fatalf("operations %+v", run.Operations)
	}
	e := run.Operations[0].Export
	if e.Location != "s3://b/k.jsonl" || e.Bytes != 42 || e.Records["memory"] != 3 || len(e.SHA256) != 64 {
		t.Fatalf("export %+v", e)
	}
	s.Operations[0].Export.Location = strings.Repeat("x", 2000)
	s.Operations[0].Export.SHA256 = strings.Repeat("a", 65)
	if e := LastRunFromSummary("j", "bot", s, true).Operations[0].Export; e.Location != "" || e.SHA256 != "" {
		t.Fatalf("over-long values copied: %+v", e)
	}
}
