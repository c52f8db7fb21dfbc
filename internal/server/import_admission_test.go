package server

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// Issue 26's fifteenth review, HIGH 1: the body of POST /v1/import was
// read up to --max-import-bytes before the route's role check, so any
// credential (an agent's) could make the service hold 32 MiB a request;
// eight held 222 MiB. Now only a credential that may import (an admin not
// bound to an owner) gets the import's limit, others --max-body-bytes, and
// imports are read and run one at a time. The waits bound the test, they
// measure nothing.
func TestImportBodyLimitIsTheImportersOnly(t *testing.T) {
	tn := newTenant(t)
	agent, ops := newTestToken(t), newTestToken(t)
	srv := tn.serve(t, serverSetup{
		args:   []string{"--max-body-bytes=65536", "--max-import-bytes=4194304", "--body-timeout=3s", "--request-timeout=5s"},
		tokens: []string{agent + " role=agent owner=mallory name=mallory", ops + " role=admin name=ops"}})
	answers := make(chan *http.Response, 4)
	wait := func(what string) int { // readAnswer closed the body
		t.Helper()
		select {
		case resp := <-answers:
			return resp.StatusCode
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no answer after 20 s", what)
			return 0
		}
	}

	// An agent's upload of 2 MB to the import path: refused unread, as any
	// body over --max-body-bytes.
	oversizeRequest(t, srv, agent, importPath, nil, answers)
	if status := wait("the agent's upload"); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("an agent's 2 MB upload to %s: %d, want 413 (its limit is --max-body-bytes)", importPath, status)
	}

	// The admin's import of 2 MB is read (its limit is 4 MiB); while its
	// body is held back, a second import is refused at once.
	oversizeRequest(t, srv, ops, importPath, nil, answers)
	if !waitUntil(10*time.Second, func() bool { return len(srv.proc.Server.imports) == 1 }) {
		t.Fatalf("the admin's import did not take the import slot")
	}
	second := srv.do(t, req{method: "POST", path: importPath, token: ops, body: "", header: map[string]string{"Content-Type": "application/x-ndjson"}})
	if second.status != http.StatusTooManyRequests || !strings.Contains(string(second.body), "problems/overloaded") {
		t.Fatalf("a second import while one is read: %d %s, want the overloaded problem", second.status, second.body)
	}
	if status := wait("the held import"); status == http.StatusRequestEntityTooLarge {
		t.Fatalf("the admin's 2 MB import was refused as too large: its limit is --max-import-bytes")
	}
	// Its body timed out: the slot is free again.
	if !waitUntil(10*time.Second, func() bool { return len(srv.proc.Server.imports) == 0 }) {
		t.Fatalf("the import slot is still held after the import ended")
	}
	srv.do(t, req{method: "POST", path: importPath, token: ops, body: "", header: map[string]string{"Content-Type": "application/x-ndjson"}}).want(t, http.StatusUnprocessableEntity)
}
