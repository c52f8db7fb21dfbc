package faults

import (
	"strings"
	"time"

	"github.com/engram-dev/engram/internal/testenv"
)

// syncBuffer collects a process's output; the suite reads it while the
// process still writes (to quote the log lines of a request it reports).
type syncBuffer struct{ testenv.SyncBuffer }

// linesOf returns the log lines that name requestID (the suite sends its
// own X-Request-Id, and the service logs every failed request with it), or
// a note saying there are none. The service writes a request's log line
// after its answer, so it waits a little for one to appear.
func (b *syncBuffer) linesOf(requestID string) string {
	deadline := time.Now().Add(logLineWait)
	for {
		var out []string
		for line := range strings.SplitSeq(b.String(), "\n") {
			if strings.Contains(line, requestID) {
				out = append(out, line)
			}
		}
		if len(out) > 0 {
			return strings.Join(out, "\n")
		}
		if time.Now().After(deadline) {
			return "(no log line names request " + requestID + ")"
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logLineWait is how long linesOf waits for a request's log line.
const logLineWait = 3 * time.Second

// logTail is how many of the service's notable log lines a failed test shows.
const logTail = 100

// notable returns the last n log lines above level INFO (the suite runs
// the service at INFO, so every request has a line for linesOf).
func (b *syncBuffer) notable(n int) string {
	var out []string
	for line := range strings.SplitSeq(b.String(), "\n") {
		if line != "" && !strings.Contains(line, `"level":"INFO"`) && !strings.Contains(line, `"level":"DEBUG"`) {
			out = append(out, line)
		}
	}
	return strings.Join(out[max(0, len(out)-n):], "\n")
}
