package main

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/engram-dev/engram/internal/testenv"
)

// endings records how a check ended a test: Fatal or Skip (both stop the
// goroutine, as testing does).
type endings struct {
	testing.TB
	failed, skipped bool
	msg             string
}

func (e *endings) Helper() {}

func (e *endings) Fatalf(format string, args ...any) {
	e.failed, e.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (e *endings) Skipf(format string, args ...any) {
	e.skipped, e.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// ending runs check with a recorder in its own goroutine, as testing runs a
// test, and returns how it ended.
func ending(check func(testing.TB)) *endings {
	e := &endings{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(e)
	}()
	<-done
	return e
}

// TestCPUMeterFailsNotSkipsUnderRequireInfra: the CPU meter's test needs
// the server's backends as local processes; under `make test`
// (ENGRAM_TEST_REQUIRE_INFRA=1) their absence fails the test like any
// missing infrastructure, and only a developer's run skips it.
func TestCPUMeterFailsNotSkipsUnderRequireInfra(t *testing.T) {
	const noSuchPid = -1
	t.Setenv(testenv.RequireInfraEnv, "1")
	if e := ending(func(tb testing.TB) { requireLocalBackend(tb, noSuchPid) }); !e.failed || e.skipped {
		t.Errorf("required: failed %v, skipped %v (%s): want a failure", e.failed, e.skipped, e.msg)
	}
	t.Setenv(testenv.RequireInfraEnv, "")
	if e := ending(func(tb testing.TB) { requireLocalBackend(tb, noSuchPid) }); !e.skipped || e.failed {
		t.Errorf("not required: failed %v, skipped %v (%s): want a skip", e.failed, e.skipped, e.msg)
	}
	if e := ending(func(tb testing.TB) { requireLocalBackend(tb, os.Getpid()) }); e.failed || e.skipped {
		t.Errorf("a local process: failed %v, skipped %v (%s)", e.failed, e.skipped, e.msg)
	}
}
