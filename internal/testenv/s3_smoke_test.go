package testenv_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestSmokeS3Server proves the S3-compatible store of the export tests:
// it answers a bucket listing that names the test's bucket, on 127.0.0.1
// when the test started it.
func TestSmokeS3Server(t *testing.T) {
	s := testenv.S3Server(t)
	req, err := http.NewRequest(http.MethodGet, s.Endpoint+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("listing buckets: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<Name>"+s.Bucket+"</Name>") {
		t.Fatalf("listing buckets: %s\n%s", resp.Status, body)
	}
	if strings.HasPrefix(s.Endpoint, "http://127.0.0.1:") {
		t.Logf("S3 test server at %s, bucket %s", s.Endpoint, s.Bucket)
	}
}
