package main

import (
	"fmt"
	"time"
)

// Scale is how big each part of the benchmark is. The full mode uses the
// sizes of issue 7; the short mode (make bench) scales the data down so the
// whole run takes about 11 minutes on a 2-core machine (of which about
// 2 are the probes' waits for PostgreSQL's statistics, see statsIdleWait),
// and every result prints the scale it was measured at.
type Scale struct {
	Mode string `json:"mode"`

	// Memory service.
	Owners          int           `json:"owners"`          // large owners loaded through the batch API
	PerOwner        int           `json:"perOwner"`        // memories of each large owner
	SmallOwners     []int         `json:"smallOwners"`     // sizes of the owners with fewer than 10 memories
	RunDuration     time.Duration `json:"runDuration"`     // measured time of one workload at one concurrency, per side
	Rounds          int           `json:"rounds"`          // service and raw alternate in this many slices
	MaxOpsPerRun    int           `json:"maxOpsPerRun"`    // bound on operations of one run, whatever the time
	Concurrency     []int         `json:"concurrency"`     // client concurrencies measured
	RecallQueries   int           `json:"recallQueries"`   // service searches checked against brute force
	LoadConcurrency int           `json:"loadConcurrency"` // parallel batch requests while loading

	// Filtered search: owners of PerOwner memories with metadata and tags.
	FilterOwners int `json:"filterOwners"`

	// Conversation memory.
	ConvMessages int `json:"convMessages"` // messages of the long session the windows read

	// Maintenance jobs.
	JobRows        int           `json:"jobRows"`        // memories bulk-loaded with COPY
	JobAddDuration time.Duration `json:"jobAddDuration"` // add load measured alone before each job (baseline)
	JobAddMaxOps   int           `json:"jobAddMaxOps"`

	// Operator.
	Runtimes   int           `json:"runtimes"`   // MemoryRuntimes created
	ReadyLimit time.Duration `json:"readyLimit"` // give up waiting for Ready after this
	IdleWindow time.Duration `json:"idleWindow"` // writes are counted over this window
	Settle     time.Duration `json:"settle"`     // quiet time before the idle window starts
}

// scaleFor returns the preset of a mode.
func scaleFor(mode string) (Scale, error) {
	switch mode {
	case "full":
		return Scale{
			Mode: mode, Owners: 200, PerOwner: 1000, SmallOwners: []int{1, 3, 5, 7, 9},
			RunDuration: 20 * time.Second, Rounds: 20, MaxOpsPerRun: 200_000, Concurrency: []int{1, 4},
			RecallQueries: 1000, LoadConcurrency: 4, ConvMessages: 10_000, FilterOwners: 20,
			JobRows: 1_000_000, JobAddDuration: 20 * time.Second, JobAddMaxOps: 100_000,
			Runtimes: 1000, ReadyLimit: 15 * time.Minute, IdleWindow: 60 * time.Second, Settle: 15 * time.Second,
		}, nil
	case "short":
		return Scale{
			Mode: mode, Owners: 40, PerOwner: 1000, SmallOwners: []int{1, 3, 5, 7, 9},
			RunDuration: 4 * time.Second, Rounds: 8, MaxOpsPerRun: 50_000, Concurrency: []int{1, 4},
			RecallQueries: 200, LoadConcurrency: 4, ConvMessages: 10_000, FilterOwners: 4,
			JobRows: 100_000, JobAddDuration: 8 * time.Second, JobAddMaxOps: 20_000,
			Runtimes: 200, ReadyLimit: 5 * time.Minute, IdleWindow: 60 * time.Second, Settle: 10 * time.Second,
		}, nil
	}
	return Scale{}, fmt.Errorf("unknown mode %q: want short or full", mode)
}

// Memories is the number of memories of the service tenant after loading.
func (s Scale) Memories() int {
	n := s.Owners * s.PerOwner
	for _, k := range s.SmallOwners {
		n += k
	}
	return n
}

// validate rejects sizes the harness cannot run.
func (s Scale) validate() error {
	switch {
	case s.FilterOwners < 1:
		return fmt.Errorf("filterOwners %d: need at least 1", s.FilterOwners)
	case s.Owners < 1 || s.PerOwner < 10:
		return fmt.Errorf("owners %d x perOwner %d: need at least 1 x 10", s.Owners, s.PerOwner)
	case s.JobRows < 2000 || s.JobRows%1000 != 0:
		return fmt.Errorf("jobRows %d: must be a multiple of 1000, at least 2000", s.JobRows)
	case s.Runtimes < 1 || s.Runtimes > 5000:
		return fmt.Errorf("runtimes %d: must be within 1..5000", s.Runtimes)
	case s.ConvMessages < 100:
		return fmt.Errorf("convMessages %d: need at least 100", s.ConvMessages)
	case s.RunDuration <= 0 || s.Rounds < 1 || s.MaxOpsPerRun < 1:
		return fmt.Errorf("run duration, rounds and max ops must be positive")
	}
	return nil
}
