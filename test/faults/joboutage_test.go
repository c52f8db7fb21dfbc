package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/engram-dev/engram/internal/jobrun"
	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// jobLimit bounds one `manager job` run of this test.
const jobLimit = 2 * time.Minute

// TestJobThroughAnOutage: `manager job` started while PostgreSQL is down,
// and one whose PostgreSQL is killed (-9) mid-purge, each exit 1 at once
// with a Failed summary that says the database is unavailable (no panic,
// no hang); once PostgreSQL is back, the killed run's lease holds the
// next run off until it expires ("skipped: locked", exit 0), and the run
// after that purges exactly what is left.
func TestJobThroughAnOutage(t *testing.T) {
	bin := buildManager(t)
	in := testenv.NewInstance(t, "faults")
	adminURL := in.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	schema, login := provision(t, ctx, adminURL, "engram_joboutage")
	const total, batch = 30000, 100
	memories := pgx.Identifier{schema, "memories"}.Sanitize()
	admin := func() *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	if _, err := admin().Exec(ctx, `INSERT INTO `+memories+` (id, owner_id, source, category, content, embedding, active, deactivated_at)
		SELECT gen_random_uuid(), 'owner-' || (g % 50), 'user', 'contextual', 'forgotten ' || g,
		       array_fill(0.25::real, ARRAY[384])::vector, false, now() - interval '90 days'
		FROM generate_series(1, $1) g`, total); err != nil {
		t.Fatal(err)
	}
	config := writeConfig(t, schema, 384)
	job := func() *exec.Cmd {
		cmd := exec.Command(bin, "job", "--config="+config, "--ops=purge", "--batch-size="+strconv.Itoa(batch), "--db-max-conns=1",
			"--termination-log=", "--log-level=warn")
		cmd.Env = append(os.Environ(), naming.EnvDatabaseURL+"="+login)
		return cmd
	}

	t.Run("started while PostgreSQL is down", func(t *testing.T) {
		in.Fault(t, "stop")
		defer in.Start(t)
		wantUnavailable(t, runJob(t, job()))
	})

	t.Run("PostgreSQL killed mid-purge", func(t *testing.T) {
		holdThirdBatch(t, ctx, admin(), schema)
		cmd := job()
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		remaining := func(c *pgx.Conn) int {
			var n int
			if err := c.QueryRow(ctx, `SELECT count(*) FROM `+memories).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		// The kill lands mid-purge whatever the machine's speed: the
		// third batch's DELETE waits in a trigger (after two batches
		// committed) until PostgreSQL is killed. Polling for the first
		// deleted row instead raced the whole purge on a busy machine.
		watch := admin()
		deadline := time.Now().Add(jobLimit)
		for !inHeldBatch(t, ctx, watch) {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				t.Fatalf("the run did not reach its third batch within %s", jobLimit)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if got := remaining(watch); got != total-2*batch {
			t.Fatalf("held in the third batch with %d of %d left, want %d", got, total, total-2*batch)
		}
		in.Fault(t, "kill")
		wantUnavailable(t, waitJob(t, cmd, &out, &stderr))
		time.Sleep(outage)
		in.Start(t)
		if _, err := admin().Exec(ctx, `DROP TRIGGER faults_hold ON `+memories); err != nil {
			t.Fatal(err)
		}

		next := runJob(t, job())
		if next.code != 0 || next.sum.Result != memory.RunSkipped || next.sum.Message != jobrun.MessageSkippedLocked {
			t.Fatalf("the run after the restart, while the killed run's lease is unexpired: exit %d %+v, want skipped: locked", next.code, next.sum)
		}
		// The lease lapses after its TTL (about 11 min with the default
		// timeouts); make that time pass.
		check := admin()
		if _, err := check.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "job_locks"}.Sanitize()+` SET expires_at = now() - interval '1 second' WHERE holder IS NOT NULL`); err != nil {
			t.Fatal(err)
		}
		left := remaining(check)
		last := runJob(t, job())
		var purged int64
		for _, op := range last.sum.Operations {
			if op.Name == memory.OpPurge {
				purged = op.Affected
			}
		}
		t.Logf("killed mid-purge with %d of %d left; after the restart the next run skipped (locked), the one after purged %d; %d left",
			left, total, purged, remaining(check))
		if last.code != 0 || last.sum.Result != memory.RunSucceeded || purged != int64(left) || remaining(check) != 0 {
			t.Fatalf("the run after the lease lapsed: exit %d %+v; purged %d of %d left", last.code, last.sum, purged, left)
		}
	})
}

// holdThirdBatch makes the third DELETE on schema's memories wait (in a
// statement trigger, pg_sleep, longer than the test) until the server is
// killed; inHeldBatch tells when a session waits there.
func holdThirdBatch(t *testing.T, ctx context.Context, admin session, schema string) {
	t.Helper()
	q := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	for _, stmt := range []string{
		`CREATE SEQUENCE ` + q("faults_batches"),
		`CREATE FUNCTION ` + q("faults_hold") + `() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
			SET search_path = pg_catalog AS $$
			BEGIN
				IF nextval('` + q("faults_batches") + `') = 3 THEN PERFORM pg_sleep(600); END IF;
				RETURN NULL;
			END $$`,
		`CREATE TRIGGER faults_hold AFTER DELETE ON ` + q("memories") + ` FOR EACH STATEMENT EXECUTE FUNCTION ` + q("faults_hold") + `()`,
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("holding the third purge batch: %v", err)
		}
	}
}

func inHeldBatch(t *testing.T, ctx context.Context, watch session) bool {
	t.Helper()
	var n int
	if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// session is a connection or a pool of the test's admin.
type session interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// jobOutcome is how a `manager job` process ended.
type jobOutcome struct {
	code   int
	sum    memory.JobSummary
	stderr string
	took   time.Duration
}

func runJob(t *testing.T, cmd *exec.Cmd) jobOutcome {
	t.Helper()
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return waitJob(t, cmd, &out, &stderr)
}

// waitJob waits for a started job (jobLimit at most) and reads its summary.
func waitJob(t *testing.T, cmd *exec.Cmd, out, stderr *bytes.Buffer) jobOutcome {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(jobLimit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("manager job did not exit within %s\n%s", jobLimit, stderr)
	}
	o := jobOutcome{stderr: stderr.String(), took: time.Since(start)}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		o.code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Bytes(), &o.sum); err != nil {
		t.Fatalf("manager job printed no summary (%v): %q\n%s", err, out, stderr)
	}
	return o
}

// wantUnavailable: the run failed cleanly because the database was down.
func wantUnavailable(t *testing.T, o jobOutcome) {
	t.Helper()
	t.Logf("exit %d after %s: %s", o.code, o.took.Round(time.Millisecond), o.sum.Message)
	if o.code != 1 || o.sum.Result != memory.RunFailed || !strings.HasPrefix(o.sum.Message, jobrun.MessageUnavailable) {
		t.Errorf("exit %d, summary %+v: want exit 1, Failed, a message starting %q", o.code, o.sum, jobrun.MessageUnavailable)
	}
	if strings.Contains(o.stderr, "panic:") || strings.Contains(o.stderr, "goroutine ") {
		t.Errorf("manager job panicked:\n%s", o.stderr)
	}
}
