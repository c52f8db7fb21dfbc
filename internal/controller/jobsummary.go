package controller

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/memory"
)

// maxMessage bounds the message copied into status.lastRun.
const maxMessage = 1024

// ParseJobSummary decodes the JSON a `manager job` run wrote to its
// termination message.
func ParseJobSummary(message string) (*memory.JobSummary, error) {
	message = strings.TrimSpace(message)
	if !strings.HasPrefix(message, "{") {
		return nil, fmt.Errorf("the termination message is not a JSON job summary")
	}
	var s memory.JobSummary
	if err := json.Unmarshal([]byte(message), &s); err != nil {
		return nil, fmt.Errorf("decoding the job summary: %w", err)
	}
	if s.Result == "" {
		return nil, fmt.Errorf("the job summary has no result")
	}
	return &s, nil
}

// LastRunFromSummary turns a job summary into status.lastRun. The summary
// comes from a container, so it is sanitised to what the CRD accepts (an
// unknown result or operation would make the status patch fail forever).
func LastRunFromSummary(jobName, runtime string, s *memory.JobSummary, jobSucceeded bool) *memoryv1alpha1.LastRun {
	run := &memoryv1alpha1.LastRun{
		JobName: jobName,
		Runtime: runtime,
		Result:  memoryv1alpha1.RunResult(s.Result),
		DryRun:  s.DryRun,
		Message: truncate(s.Message, maxMessage),
	}
	switch run.Result {
	case memoryv1alpha1.RunSucceeded, memoryv1alpha1.RunFailed, memoryv1alpha1.RunSkipped:
	default:
		run.Result = resultOf(jobSucceeded)
		run.Message = truncate(fmt.Sprintf("unknown result %q in the job summary; %s", s.Result, run.Message), maxMessage)
	}
	if !s.StartTime.IsZero() {
		run.StartTime = &metav1.Time{Time: s.StartTime}
	}
	if !s.CompletionTime.IsZero() {
		run.CompletionTime = &metav1.Time{Time: s.CompletionTime}
	}
	for _, op := range s.Operations {
		name := memoryv1alpha1.Operation(op.Name)
		if !slices.Contains(memoryv1alpha1.CanonicalOperations, name) {
			continue
		}
		run.Operations = append(run.Operations, memoryv1alpha1.OperationSummary{
			Name: name, Scanned: op.Scanned, Affected: op.Affected, DurationMillis: op.DurationMillis,
			Export: exportOutcome(op.Export),
		})
	}
	return run
}

func resultOf(succeeded bool) memoryv1alpha1.RunResult {
	if succeeded {
		return memoryv1alpha1.RunSucceeded
	}
	return memoryv1alpha1.RunFailed
}

func truncate(s string, n int) string { //nolint:unparam // the cap is the caller's to say, though all say maxMessage today
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// maxExportKinds bounds the record kinds copied (the CRD's MaxProperties).
const maxExportKinds = 32

// exportOutcome is what status says of an export, cut to what the CRD
// accepts: a summary from a container that breaks a bound would make the
// status patch fail forever.
func exportOutcome(e *memory.JobExport) *memoryv1alpha1.ExportOutcome {
	if e == nil {
		return nil
	}
	out := &memoryv1alpha1.ExportOutcome{Location: e.Location, Bytes: e.Bytes}
	if len(out.Location) > 1024 {
		out.Location = ""
	}
	if len(e.SHA256) <= 64 {
		out.SHA256 = e.SHA256
	}
	for k, n := range e.Records {
		if len(out.Records) == maxExportKinds {
			break
		}
		if out.Records == nil {
			out.Records = map[string]int64{}
		}
		out.Records[k] = n
	}
	return out
}
