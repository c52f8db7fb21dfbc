package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// lease reads the maintenance lease row as admin.
func (f *fixture) lease() (holder *string, until *time.Time) {
	f.t.Helper()
	if err := f.admin.QueryRow(ctx(f.t), `SELECT holder, expires_at FROM `+f.store.sql.jobLocks+` WHERE name = 'maintenance'`).Scan(&holder, &until); err != nil {
		f.t.Fatal(err)
	}
	return holder, until
}

// TestJobLeaseOneRunAtATime: of two runs started together exactly one runs
// and the other gets ErrLocked; a run nested in a running one is refused;
// the lease is given back at the end and the next run works.
func TestJobLeaseOneRunAtATime(t *testing.T) {
	f := newFixture(t)
	start := make(chan struct{})
	var mu sync.Mutex
	ran, locked := 0, 0
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			<-start
			err := f.store.WithJobLock(ctx(t), func(context.Context) error {
				time.Sleep(500 * time.Millisecond) // overlap the other run for sure
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ran++
			case errors.Is(err, ErrLocked):
				locked++
			default:
				t.Errorf("concurrent run: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if ran != 1 || locked != 1 {
		t.Fatalf("two concurrent runs: %d ran, %d skipped; want 1 and 1", ran, locked)
	}
	if holder, until := f.lease(); holder != nil || until != nil {
		t.Fatalf("lease not given back: holder %v until %v", *holder, until)
	}

	called := false
	err := f.store.WithJobLock(ctx(t), func(c context.Context) error {
		holder, until := f.lease()
		if holder == nil || until == nil || time.Until(*until) < time.Minute {
			return fmt.Errorf("lease row while running: holder %v until %v", holder, until)
		}
		inner := f.store.WithJobLock(c, func(context.Context) error { return errors.New("nested run ran") })
		if !errors.Is(inner, ErrLocked) {
			return fmt.Errorf("nested run: %v, want ErrLocked", inner)
		}
		called = true
		return nil
	})
	if err != nil || !called {
		t.Fatalf("WithJobLock: %v (called %v)", err, called)
	}
}

// TestJobLeaseExpiry: an unexpired lease of another run is respected, an
// expired one (a killed run) is taken over.
func TestJobLeaseExpiry(t *testing.T) {
	f := newFixture(t)
	setLease := func(interval string) {
		t.Helper()
		if _, err := f.admin.Exec(ctx(t), `UPDATE `+f.store.sql.jobLocks+` SET holder = 'killed-run', expires_at = now() + $1::interval
			WHERE name = 'maintenance'`, interval); err != nil {
			t.Fatal(err)
		}
	}
	setLease("1 minute")
	err := f.store.WithJobLock(ctx(t), func(context.Context) error { return errors.New("ran under another run's lease") })
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("while another run's lease is valid: %v, want ErrLocked", err)
	}
	setLease("-1 second")
	ran := false
	if err := f.store.WithJobLock(ctx(t), func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("over an expired lease: %v (ran %v), want a run", err, ran)
	}
}

// TestJobLeaseRenewal: a run longer than the lease's TTL keeps it (renewed
// every third of the TTL), so another run is refused after the first TTL
// has passed; a run whose lease is taken away stops with ErrLeaseLost.
func TestJobLeaseRenewal(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	f := newFixture(t, withLeaseTTL(ttl))
	err := f.store.WithJobLock(ctx(t), func(c context.Context) error {
		time.Sleep(ttl + ttl/2)
		if inner := f.store.WithJobLock(c, func(context.Context) error { return nil }); !errors.Is(inner, ErrLocked) {
			return fmt.Errorf("second run after the first TTL: %v, want ErrLocked (lease not renewed)", inner)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	err = f.store.WithJobLock(ctx(t), func(c context.Context) error {
		if _, err := f.admin.Exec(c, `UPDATE `+f.store.sql.jobLocks+` SET holder = 'thief' WHERE name = 'maintenance'`); err != nil {
			return err
		}
		select {
		case <-c.Done():
			return c.Err()
		case <-time.After(5 * ttl):
			return errors.New("the run went on after its lease was taken")
		}
	})
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("run whose lease was taken: %v, want ErrLeaseLost", err)
	}
	if took := time.Since(start); took > 2*ttl {
		t.Fatalf("the run stopped %s after losing its lease, want within %s", took, 2*ttl)
	}
	if holder, _ := f.lease(); holder == nil || *holder != "thief" {
		t.Fatalf("the stopped run released another run's lease: holder %v", holder)
	}
}

// TestJobLeaseOneConnection: a maintenance run on a pool of one connection
// (`manager job --db-max-conns=1`) finishes: the lease holds no connection
// between its short statements, and its renewals (every 100 ms here) wait
// for the run's statements instead of deadlocking with them.
func TestJobLeaseOneConnection(t *testing.T) {
	f := newFixture(t, withMaxConns(1), withLeaseTTL(300*time.Millisecond),
		withPolicy(func(p *Policy) { p.Forgetting.MinDecayScore = 0.5 }))
	seedJobs(t, f)
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	affected := map[string]int64{}
	err := f.store.WithJobLock(c, func(c context.Context) error {
		for _, op := range Operations {
			res, err := f.store.RunJob(c, op, JobOptions{BatchSize: 1})
			if err != nil {
				return err
			}
			affected[op] = res.Affected
			time.Sleep(150 * time.Millisecond) // let a renewal in between
		}
		return nil
	})
	if err != nil {
		t.Fatalf("run on one connection: %v", err)
	}
	want := map[string]int64{OpDecay: 3, OpExpire: 2, OpPurge: 4, OpCompact: 3, OpSummarize: 0, OpSessions: 0}
	if fmt.Sprint(affected) != fmt.Sprint(want) {
		t.Fatalf("affected %v, want %v", affected, want)
	}
}
