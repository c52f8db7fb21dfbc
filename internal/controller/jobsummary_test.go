package controller

import (
	"strings"
	"testing"
	"time"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

func TestParseJobSummary(t *testing.T) {
	msg := `{"schema":"engram_a_b","dryRun":true,"result":"Succeeded","startTime":"2025-03-10T03:00:00Z",
		"completionTime":"2025-03-10T03:00:02Z","operations":[{"name":"decay","scanned":10,"affected":2,"batches":1,"durationMillis":5},
		{"name":"vacuum","scanned":1}],"future":"field"}`
	s, err := ParseJobSummary(msg)
	if err != nil {
		t.Fatal(err)
	}
	run := LastRunFromSummary("job-1", "bot", s, true)
	if run.JobName != "job-1" || run.Runtime != "bot" || run.Result != memoryv1alpha1.RunSucceeded || !run.DryRun {
		t.Errorf("lastRun = %+v", run)
	}
	if len(run.Operations) != 1 || run.Operations[0] != (memoryv1alpha1.OperationSummary{Name: "decay", Scanned: 10, Affected: 2, DurationMillis: 5}) {
		t.Errorf("operations = %+v (unknown operations must be dropped)", run.Operations)
	}
	if !run.StartTime.Time.Equal(time.Date(2025, 3, 10, 3, 0, 0, 0, time.UTC)) || run.CompletionTime == nil {
		t.Errorf("times = %v, %v", run.StartTime, run.CompletionTime)
	}

	for _, bad := range []string{"", "panic: runtime error", `{"result":""}`, `{"result":`} {
		if _, err := ParseJobSummary(bad); err == nil {
			t.Errorf("ParseJobSummary(%q) accepted", bad)
		}
	}
}

func TestLastRunFromSummarySanitises(t *testing.T) {
	s, err := ParseJobSummary(`{"result":"Exploded","message":"` + strings.Repeat("é", 2000) + `"}`)
	if err != nil {
		t.Fatal(err)
	}
	run := LastRunFromSummary("j", "bot", s, false)
	if run.Result != memoryv1alpha1.RunFailed {
		t.Errorf("an unknown result became %q, want Failed (from the Job)", run.Result)
	}
	if len(run.Message) > maxMessage+len("…") || !strings.HasPrefix(run.Message, "unknown result") {
		t.Errorf("message has %d bytes: %.40q", len(run.Message), run.Message)
	}
	if !strings.HasSuffix(run.Message, "…") || strings.ContainsRune(run.Message, '\uFFFD') {
		t.Error("message was not cut on a character boundary")
	}
}
