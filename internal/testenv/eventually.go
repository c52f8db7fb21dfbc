package testenv

import (
	"errors"
	"testing"
	"time"
)

// pollInterval is how often Eventually asks again: short next to the
// timeouts tests give (seconds), long enough not to load a busy machine.
const pollInterval = 100 * time.Millisecond

// Eventually polls check until it returns nil, or fails the test with what
// was awaited and check's last error once timeout has passed.
func Eventually(t testing.TB, what string, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(pollInterval)
	}
}

// EventuallyTrue is Eventually for a condition with no error to tell.
func EventuallyTrue(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	Eventually(t, what, timeout, func() error {
		if !cond() {
			return errors.New("still false")
		}
		return nil
	})
}
