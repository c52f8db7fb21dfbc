package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Environment of the S3-compatible store the export tests use.
const (
	// S3ServerEnv names the test server binary hack/s3server.sh builds
	// (module tools/s3server); `make test` sets it.
	S3ServerEnv = "ENGRAM_S3SERVER"
	// S3EndpointEnv, when set, names a store of the user's own instead:
	// with S3BucketEnv (a bucket the tests may write to) and the access key.
	S3EndpointEnv        = "ENGRAM_TEST_S3_ENDPOINT"
	S3BucketEnv          = "ENGRAM_TEST_S3_BUCKET"
	S3AccessKeyIDEnv     = "ENGRAM_TEST_S3_ACCESS_KEY_ID"
	S3SecretAccessKeyEnv = "ENGRAM_TEST_S3_SECRET_ACCESS_KEY"
)

// S3 is an S3-compatible store for a test: a bucket, its path-style
// endpoint and an access key.
type S3 struct {
	Endpoint, Bucket, AccessKeyID, SecretAccessKey string
}

// testBucket is the bucket a started server creates.
const testBucket = "engram-test"

// S3Server returns a store for the test: the user's (S3EndpointEnv), else
// a server of its own started from S3ServerEnv on 127.0.0.1, stopped when
// the test ends. Missing both fails the test under `make test` and skips
// it otherwise.
func S3Server(t testing.TB) *S3 {
	t.Helper()
	if ep := os.Getenv(S3EndpointEnv); ep != "" {
		s := &S3{Endpoint: ep, Bucket: os.Getenv(S3BucketEnv), AccessKeyID: os.Getenv(S3AccessKeyIDEnv), SecretAccessKey: os.Getenv(S3SecretAccessKeyEnv)}
		if s.Bucket == "" || s.AccessKeyID == "" || s.SecretAccessKey == "" {
			t.Fatalf("%s is set: set %s, %s and %s too", S3EndpointEnv, S3BucketEnv, S3AccessKeyIDEnv, S3SecretAccessKeyEnv)
		}
		return s
	}
	bin := Binary(t, S3ServerEnv, "run hack/s3server.sh and set "+S3ServerEnv+" to the path it prints, or set "+S3EndpointEnv)
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addr")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--listen=127.0.0.1:0", "--db="+filepath.Join(dir, "s3.bolt"), "--bucket="+testBucket, "--addr-file="+addrFile)
	out := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	var addr string
	EventuallyTrue(t, "the S3 test server listens", 30*time.Second, func() bool {
		select {
		case <-done:
			t.Fatalf("the S3 test server exited: %s", out.String())
		default:
		}
		b, err := os.ReadFile(addrFile)
		addr = strings.TrimSpace(string(b))
		return err == nil && addr != ""
	})
	return &S3{Endpoint: "http://" + addr, Bucket: testBucket, AccessKeyID: "engram-test", SecretAccessKey: "engram-test-secret"}
}
