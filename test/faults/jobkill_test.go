package faults

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
	"github.com/engram-dev/engram/internal/testenv/tenanttest"
)

// TestJobKilledMidBatch: a `manager job` purging 30,000 memories is killed
// with SIGKILL after its first batches committed. Each batch is its own
// transaction, so the kill loses at most the batch in flight; once the
// killed run's lease has lapsed, the next run purges exactly what is left —
// nothing twice, nothing skipped — and a run on one database connection
// does not deadlock.
func TestJobKilledMidBatch(t *testing.T) {
	bin := buildManager(t)
	adminURL := testenv.NewDatabase(t)
	admin := testenv.NewPool(t, adminURL, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tn := tenanttest.Provision(t, ctx, adminURL, "engram_jobkill", 64)
	schema, login := tn.Schema, tn.LoginURL
	const total = 30000
	memories := pgx.Identifier{schema, "memories"}.Sanitize()
	if _, err := admin.Exec(ctx, `INSERT INTO `+memories+` (id, owner_id, source, category, content, embedding, active, deactivated_at)
		SELECT gen_random_uuid(), 'owner-' || (g % 50), 'user', 'contextual', 'forgotten ' || g,
		       array_fill(0.25::real, ARRAY[64])::vector, false, now() - interval '90 days'
		FROM generate_series(1, $1) g`, total); err != nil {
		t.Fatal(err)
	}
	remaining := func() int {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM `+memories).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	config := writeConfig(t, schema, 64)
	job := func() *exec.Cmd {
		cmd := exec.Command(bin, "job", "--config="+config, "--ops=purge", "--batch-size=100", "--db-max-conns=1",
			"--termination-log=", "--log-level=warn")
		cmd.Env = append(os.Environ(), naming.EnvDatabaseURL+"="+login)
		return cmd
	}

	// The kill lands mid-purge whatever the machine's speed: the third
	// batch waits in a trigger after two batches committed (polling for the
	// first deleted row raced the whole purge on a busy machine).
	holdThirdBatch(t, ctx, admin, schema)
	first := job()
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !inHeldBatch(t, ctx, admin) {
		if time.Now().After(deadline) {
			_ = first.Process.Kill()
			t.Fatal("the first run did not reach its third batch within 60 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	// The killed run's backend still waits in the held batch (it notices
	// its client is gone only when it next talks to it): end it, which
	// rolls the batch in flight back, as a kill -9 of the whole pod would.
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND usename = $1`, tn.Result.LoginRole); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `DROP TRIGGER faults_hold ON `+memories); err != nil {
		t.Fatal(err)
	}
	for {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = $1`, tn.Result.LoginRole).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed run's database session did not end")
		}
		time.Sleep(20 * time.Millisecond)
	}
	left := remaining()
	if left != total-200 {
		t.Fatalf("the killed run left %d of %d, want %d (two batches of 100 committed, the third rolled back)", left, total, total-200)
	}
	// The killed run's lease lapses after its TTL; make that time pass.
	if _, err := admin.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "job_locks"}.Sanitize()+` SET expires_at = now() - interval '1 second' WHERE holder IS NOT NULL`); err != nil {
		t.Fatal(err)
	}

	out, err := job().Output()
	if err != nil {
		t.Fatalf("the next run failed: %v\n%s", err, out)
	}
	var sum memory.JobSummary
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("the next run's summary %q: %v", out, err)
	}
	var purged int64
	for _, op := range sum.Operations {
		if op.Name == memory.OpPurge {
			purged = op.Affected
		}
	}
	t.Logf("killed run purged %d of %d; the next run (%s) purged %d; %d left", total-left, total, sum.Result, purged, remaining())
	if sum.Result != string(memory.RunSucceeded) {
		t.Fatalf("the next run: %+v", sum)
	}
	if purged != int64(left) || remaining() != 0 {
		t.Errorf("counts do not add up: %d before the kill, %d purged after it by the next run, %d left", total, purged, remaining())
	}
}
