package jobrun

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// seedExport gives the tenant every record kind a run can export:
// memories with history, sessions with messages (summarize, run before
// export in the same run, adds summaries and their sources), a profile
// and its changelog.
func seedExport(t *testing.T, jt *jobTenant) {
	t.Helper()
	seed(t, jt)
	_, err := jt.store.PutDocument(context.Background(), memory.PutDocumentRequest{Owner: "olga", Agent: "bot", Kind: "profile", Content: "Olga builds bridges."})
	if err != nil {
		t.Fatal(err)
	}
}

// s3Env is the environment that hands the job the store's access key.
func s3Env(s *testenv.S3) map[string]string {
	return map[string]string{naming.EnvExportS3AccessKeyID: s.AccessKeyID, naming.EnvExportS3SecretAccessKey: s.SecretAccessKey}
}

func s3Args(s *testenv.S3, endpoint string) []string {
	return []string{"--export-s3-endpoint=" + endpoint, "--export-s3-bucket=" + s.Bucket, "--export-s3-prefix=runs/", "--export-s3-path-style"}
}

func testS3Client(s *testenv.S3) *s3.Client {
	return newS3Client(&S3Destination{Endpoint: s.Endpoint, Bucket: s.Bucket, Region: "us-east-1", UsePathStyle: true,
		AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey})
}

// exportOp is the summary of the run's export operation.
func exportOp(t *testing.T, sum memory.JobSummary) memory.JobSummaryOp {
	t.Helper()
	for _, op := range sum.Operations {
		if op.Name == memory.OpExport {
			if op.Export == nil {
				t.Fatalf("the export operation's summary names no file: %+v", op)
			}
			return op
		}
	}
	t.Fatalf("no export operation in %+v", sum)
	return memory.JobSummaryOp{}
}

// checkComplete reads an export back: the trailer is last, says complete,
// counts the lines before it and matches their SHA-256, and its counts
// equal the header's and the run's summary.
func checkComplete(t *testing.T, body []byte, op memory.JobSummaryOp) {
	t.Helper()
	if int64(len(body)) != op.Export.Bytes {
		t.Errorf("the export holds %d bytes, the summary says %d", len(body), op.Export.Bytes)
	}
	lines := bytes.SplitAfter(bytes.TrimSuffix(body, []byte("\n")), []byte("\n"))
	var head memory.ExportTrailer
	var header struct {
		Kind   string           `json:"kind"`
		Counts map[string]int64 `json:"counts"`
	}
	if err := json.Unmarshal(lines[0], &header); err != nil || header.Kind != memory.ExportKindHeader {
		t.Fatalf("first line is not a header (%v): %s", err, lines[0])
	}
	if err := json.Unmarshal(lines[len(lines)-1], &head); err != nil || head.Kind != memory.ExportKindTrailer {
		t.Fatalf("last line is not a trailer (%v): %s", err, lines[len(lines)-1])
	}
	h := sha256.New()
	for _, l := range lines[:len(lines)-1] {
		h.Write(l)
	}
	if got := hex.EncodeToString(h.Sum(nil)); !head.Complete || got != head.SHA256 || head.SHA256 != op.Export.SHA256 || head.Lines != int64(len(lines)-1) {
		t.Fatalf("trailer %+v: complete, sha256 %s of %d lines (summary %s) expected", head, got, len(lines)-1, op.Export.SHA256)
	}
	if !maps.Equal(head.Counts, header.Counts) || !maps.Equal(head.Counts, op.Export.Records) {
		t.Fatalf("counts: trailer %v, header %v, summary %v", head.Counts, header.Counts, op.Export.Records)
	}
}

// reimport imports body into an empty tenant, exports that tenant and
// returns the second export's trailer counts.
func reimport(t *testing.T, body []byte) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	jt := newJobTenant(t)
	if _, err := jt.store.Import(ctx, memory.ImportRequest{Body: body,
		Embedder: memory.ExportEmbedder{Provider: memory.ProviderBuiltin, Dimensions: dims}}); err != nil {
		t.Fatalf("importing the export: %v", err)
	}
	tr, err := jt.store.Export(ctx, memory.ExportRequest{}, io.Discard, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return tr.Counts
}

// checkReadBack: the export read back (body, or the error of reading it)
// is complete and reimports to the records the run counted.
func checkReadBack(t *testing.T, body []byte, err error, op memory.JobSummaryOp) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	checkComplete(t, body, op)
	if got := reimport(t, body); !maps.Equal(got, op.Export.Records) {
		t.Fatalf("reimported tenant exports %v, the original %v", got, op.Export.Records)
	}
}

// TestExportOperationUploadsACompleteExportToS3 runs summarize and export
// through `manager job` against a real S3-compatible server: the object
// is complete (trailer counts and checksum), named in the summary, and
// reimports into an empty tenant with the same counts.
func TestExportOperationUploadsACompleteExportToS3(t *testing.T) {
	jt := newJobTenant(t)
	seedExport(t, jt)
	store := testenv.S3Server(t)
	code, sum, _ := runMainEnv(t, jt, s3Env(store), append([]string{"--ops=export,summarize", "--export-vectors"}, s3Args(store, store.Endpoint)...)...)
	if code != 0 || sum.Result != memory.RunSucceeded {
		t.Fatalf("exit %d, summary %+v", code, sum)
	}
	if len(sum.Operations) != 2 || sum.Operations[0].Name != memory.OpSummarize {
		t.Fatalf("operations %+v: summarize, then export", sum.Operations)
	}
	op := exportOp(t, sum)
	want := regexp.MustCompile(`^s3://` + store.Bucket + `/runs/` + jt.schema + `-\d{8}T\d{6}Z\.jsonl$`)
	if !want.MatchString(op.Export.Location) {
		t.Fatalf("location %q, want %s", op.Export.Location, want)
	}
	for _, kind := range []string{"memory", "history", "session", "message", "summary", "summarySource", "document", "documentChange"} {
		if op.Export.Records[kind] == 0 {
			t.Errorf("no %s record exported: %v", kind, op.Export.Records)
		}
	}
	key := strings.TrimPrefix(op.Export.Location, "s3://"+store.Bucket+"/")
	obj, err := testS3Client(store).GetObject(context.Background(), &s3.GetObjectInput{Bucket: &store.Bucket, Key: &key})
	if err != nil {
		t.Fatalf("fetching %s: %v", op.Export.Location, err)
	}
	body, err := io.ReadAll(obj.Body)
	_ = obj.Body.Close()
	checkReadBack(t, body, err, op)
}

// TestExportOperationWritesACompleteFileToThePVC: the file appears under
// its final name only when complete, nothing partial is left, and it
// reimports; a dry run writes nothing.
func TestExportOperationWritesACompleteFileToThePVC(t *testing.T) {
	jt := newJobTenant(t)
	seedExport(t, jt)
	dir := t.TempDir() // stands in for the claim's mount
	args := []string{"--ops=export", "--export-dir=" + dir, "--export-pvc-claim=backups", "--export-pvc-subpath=engram/team-a"}
	code, sum, _ := runMain(t, jt, append(args, "--dry-run")...)
	if code != 0 || sum.Result != memory.RunSucceeded || exportOp(t, sum).Export.Location != "" {
		t.Fatalf("dry run: exit %d, summary %+v", code, sum)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a dry run wrote %v", entries)
	}
	code, sum, _ = runMain(t, jt, args...)
	if code != 0 || sum.Result != memory.RunSucceeded {
		t.Fatalf("exit %d, summary %+v", code, sum)
	}
	op := exportOp(t, sum)
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the directory holds %v (%v), want the one export file", entries, err)
	}
	name := entries[0].Name()
	if op.Export.Location != "pvc://backups/engram/team-a/"+name || !strings.HasPrefix(name, jt.schema+"-") || !strings.HasSuffix(name, ".jsonl") {
		t.Fatalf("file %s, location %s", name, op.Export.Location)
	}
	body, err := os.ReadFile(filepath.Join(dir, name))
	checkReadBack(t, body, err, op)
}

// TestExportOperationRefusesARunWithoutADestination: the flags are
// checked before any operation runs.
func TestExportOperationRefusesARunWithoutADestination(t *testing.T) {
	jt := newJobTenant(t)
	code, sum, _ := runMain(t, jt, "--ops=decay,export")
	if code != 1 || sum.Result != memory.RunFailed || len(sum.Operations) != 0 || !strings.Contains(sum.Message, "--export-dir or --export-s3-bucket") {
		t.Fatalf("exit %d, summary %+v", code, sum)
	}
	store := &testenv.S3{Bucket: "b"}
	code, sum, _ = runMain(t, jt, append([]string{"--ops=export"}, s3Args(store, "http://127.0.0.1:1")...)...)
	if code != 1 || !strings.Contains(sum.Message, naming.EnvExportS3AccessKeyID) {
		t.Fatalf("no access key: exit %d, summary %+v", code, sum)
	}
}

// bulkMemories writes n memories of about 2 KiB each with SQL, so an
// export spans several 5 MiB parts.
func bulkMemories(t *testing.T, jt *jobTenant, n int) {
	t.Helper()
	jt.exec(t, `INSERT INTO $schema.memories (id, owner_id, source, category, content, importance, embedding, active, created_at, updated_at)
		SELECT gen_random_uuid(), 'bulk', 'user', 'project', 'bulk memory ' || i || ' ' || repeat('x', 2000), 5,
		       (SELECT embedding FROM $schema.memories LIMIT 1), true, now(), now()
		FROM generate_series(1, $1::int) AS i`, n)
}

// stoppingProxy forwards to an S3 server until the first part of a
// multipart upload went through; then it stops as a server going away
// does: every later request (the next part, the abort) has its
// connection dropped. The job sees a store that stopped mid-upload.
func stoppingProxy(t *testing.T, target string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	var stopped atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stopped.Load() {
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					_ = c.Close()
				}
			}
			return
		}
		rp.ServeHTTP(w, r)
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "1" {
			stopped.Store(true)
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

// TestExportOperationFailedUploadLeavesNoObject: the store stops after the
// first part; the run fails, says why, and no object exists under any
// name of the run: a half-uploaded export is never taken for complete.
func TestExportOperationFailedUploadLeavesNoObject(t *testing.T) {
	jt := newJobTenant(t)
	seedExport(t, jt)
	bulkMemories(t, jt, 4000) // ~8 MiB: two parts of 5 MiB
	store := testenv.S3Server(t)
	proxy := stoppingProxy(t, store.Endpoint)
	args := append([]string{"--ops=export", "--export-part-size=5242880"}, s3Args(store, proxy.URL)...)
	code, sum, _ := runMainEnv(t, jt, s3Env(store), args...)
	if code != 1 || sum.Result != memory.RunFailed || !strings.Contains(sum.Message, "uploading part 2") {
		t.Fatalf("exit %d, summary %+v", code, sum)
	}
	if strings.Contains(sum.Message, store.SecretAccessKey) {
		t.Fatalf("the summary holds the secret key: %s", sum.Message)
	}
	list, err := testS3Client(store).ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &store.Bucket, Prefix: aws.String("runs/" + jt.schema)})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Contents) != 0 {
		t.Fatalf("objects left by a failed upload: %s", aws.ToString(list.Contents[0].Key))
	}
}

// TestExportOperationAbortsTheUploadItCannotFinish: when the store still
// answers but refuses a part, the run aborts the multipart upload, so
// no part is left behind either.
func TestExportOperationAbortsTheUploadItCannotFinish(t *testing.T) {
	jt := newJobTenant(t)
	seedExport(t, jt)
	bulkMemories(t, jt, 4000)
	store := testenv.S3Server(t)
	u, _ := url.Parse(store.Endpoint)
	rp := httputil.NewSingleHostReverseProxy(u)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>quota exceeded</Message></Error>`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	args := append([]string{"--ops=export", "--export-part-size=5242880"}, s3Args(store, ts.URL)...)
	code, sum, _ := runMainEnv(t, jt, s3Env(store), args...)
	if code != 1 || sum.Result != memory.RunFailed || !strings.Contains(sum.Message, "uploading part 2") || strings.Contains(sum.Message, "aborting") {
		t.Fatalf("exit %d, summary %+v", code, sum)
	}
	c := testS3Client(store)
	uploads, err := c.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: &store.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	if len(uploads.Uploads) != 0 {
		t.Fatalf("a multipart upload was left: %s", aws.ToString(uploads.Uploads[0].Key))
	}
	list, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &store.Bucket, Prefix: aws.String("runs/")})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Contents) != 0 {
		t.Fatalf("objects left by a failed upload: %s", aws.ToString(list.Contents[0].Key))
	}
}
