package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// failureLog is the service's log as a failed test prints it: without the
// lines of requests answered below 400, which a load writes by the
// thousand and which would push the lines that explain the failure out of
// the tail a CI report shows. It says how many it left out.
func failureLog(log string) string {
	var kept strings.Builder
	left := 0
	for line := range strings.Lines(log) {
		var rec struct {
			Msg    string `json:"msg"`
			Status int    `json:"status"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request" && rec.Status > 0 && rec.Status < 400 {
			left++
			continue
		}
		kept.WriteString(line)
	}
	return fmt.Sprintf("(%d lines of requests answered below 400 left out)\n%s", left, kept.String())
}

// The answered requests go, the rest stays, and the count says so.
func TestFailureLogLeavesOutAnsweredRequests(t *testing.T) {
	log := `{"level":"INFO","msg":"request","status":200}
{"level":"INFO","msg":"request","status":503}
{"level":"ERROR","msg":"adding a memory","err":"lock timeout"}
not json
{"level":"INFO","msg":"request","status":201}
`
	want := `(2 lines of requests answered below 400 left out)
{"level":"INFO","msg":"request","status":503}
{"level":"ERROR","msg":"adding a memory","err":"lock timeout"}
not json
`
	if got := failureLog(log); got != want {
		t.Fatalf("failureLog:\n%s\nwant:\n%s", got, want)
	}
}
