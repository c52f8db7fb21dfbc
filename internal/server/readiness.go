package server

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/engram-dev/engram/internal/tenant"
)

// readyCacheTTL is how long /readyz reuses its last database check. The
// probe is open to anyone who reaches the port: without a cache every call
// would cost a database round trip, so a flood of probes would load the
// database. A second is short enough for the kubelet (5 s period) to see a
// recovery at its next probe.
const readyCacheTTL = time.Second

// readiness is the cached outcome of the database check of /readyz.
type readiness struct {
	mu        sync.Mutex
	checkedAt time.Time
	problem   *Problem // nil when ready
	cause     error    // behind problem, for the access log
	status    statusResponse
}

// check returns the last outcome when it is younger than readyCacheTTL,
// else runs the check. Callers wait for a check in progress and share its
// outcome, so at most one check runs at a time however many probes arrive.
func (c *readiness) check(run func(context.Context) (statusResponse, *Problem, error)) (statusResponse, *Problem, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.checkedAt.IsZero() && time.Since(c.checkedAt) < readyCacheTTL {
		return c.status, c.problem, c.cause
	}
	// Not the request's context: its outcome is shared with other probes,
	// so one client hanging up must not turn into "not ready" for all.
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	c.status, c.problem, c.cause = run(ctx)
	c.checkedAt = time.Now()
	return c.status, c.problem, c.cause
}

// checkReady: the database answers as the tenant role and the schema is at
// this binary's version (a new image waits for the operator's migration).
func (s *Server) checkReady(ctx context.Context) (statusResponse, *Problem, error) {
	if err := s.pool.Ping(ctx); err != nil {
		return statusResponse{}, newProblem(probUnavailable, "the database cannot be reached"), err
	}
	st, err := tenant.Status(ctx, s.pool, s.schema)
	if err != nil {
		return statusResponse{}, newProblem(probUnavailable, "the schema version cannot be read"), err
	}
	if !st.UpToDate() {
		return statusResponse{}, newProblem(probUnavailable,
			"the schema is at version "+strconv.Itoa(st.Current)+", this binary needs "+strconv.Itoa(st.Latest)+"; the operator migrates it"), nil
	}
	return statusResponse{Status: "ready", SchemaVersion: st.Current, LatestSchemaVersion: st.Latest}, nil, nil
}
