package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestCitusTargetsAskPointEightOfPlain: the Citus comparison of the service
// part reports, for each workload and concurrency, the service's throughput
// on Citus / on plain PostgreSQL against issue 30's goal of 0.8, and the
// recall on Citus; without a Citus leg there is no such target.
func TestCitusTargetsAskPointEightOfPlain(t *testing.T) {
	c := &CitusReport{
		Workloads: []CitusWL{
			{Name: "vector search", Concurrency: 1, Ratio: 0.93},
			{Name: "add (dedup)", Concurrency: 4, Ratio: 0.5},
		},
		Quality: Quality{Queries: 10, RecallAt10: 1, MinRecall: 1, SmallOwnersComplete: true},
	}
	got := map[string]Target{}
	for _, tg := range citusTargets(c) {
		got[tg.Name] = tg
	}
	want := map[string]bool{
		"vector search on Citus / on plain PostgreSQL, service throughput, c=1": true,
		"add (dedup) on Citus / on plain PostgreSQL, service throughput, c=4":   false,
		"recall@10 of service vector search on Citus vs brute force":            true,
	}
	if len(got) != len(want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	for name, met := range want {
		tg, ok := got[name]
		if !ok || tg.Met != met {
			t.Errorf("%s: %+v, want met %v", name, tg, met)
		}
		if strings.Contains(name, "/ on plain") && tg.Goal != ">= 0.80" {
			t.Errorf("%s: goal %q", name, tg.Goal)
		}
	}
	if ts := citusTargets(nil); len(ts) != 0 {
		t.Errorf("targets without a Citus leg: %v", ts)
	}
	if md := markdownOf(&ServiceReport{Citus: c}); !strings.Contains(md, "| vector search | 1 |") || !strings.Contains(md, "**0.93**") {
		t.Errorf("the Citus table is missing from the report:\n%s", md)
	}
}

func markdownOf(s *ServiceReport) string {
	var b strings.Builder
	citusMarkdown(func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }, Scale{RunDuration: time.Second, Rounds: 2}, s)
	return b.String()
}

// TestCPUMeterReadsTheServiceAndOneDatabasesBackends: the meter of one side
// counts its service process and the backends of its database only, each
// with the port of its server, from /proc.
func TestCPUMeterReadsTheServiceAndOneDatabasesBackends(t *testing.T) {
	dbURL := testenv.NewDatabase(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	requireLocalBackend(t, pid)
	m := cpuMeter{servicePID: os.Getpid(), database: strings.TrimPrefix(u.Path, "/")}
	before := m.read()
	b, ok := before.backends[pid]
	if !ok || b.port != port {
		t.Fatalf("the meter does not see backend %d on port %d: %+v", pid, port, before.backends)
	}
	// Work on both sides: the backend sorts, this process spins.
	if _, err := conn.Exec(ctx, "SELECT count(*) FROM (SELECT md5(i::text) FROM generate_series(1, 300000) i ORDER BY 1) s"); err != nil {
		t.Fatal(err)
	}
	for spin := time.Now(); time.Since(spin) < 200*time.Millisecond; {
	}
	d := m.read().since(before, 0)
	if d.service <= 0 || d.coordinator <= 0 || d.workers != 0 {
		t.Errorf("service %.3f s, database %.3f s, workers %.3f s: want the first two > 0, no workers on plain PostgreSQL", d.service, d.coordinator, d.workers)
	}
	// The harness is this process, as the "service" is here: it spun, and
	// both readings of it agree within a few clock ticks.
	if d.harness <= 0 || d.harness-d.service > 0.03 || d.service-d.harness > 0.03 {
		t.Errorf("harness %.3f s, service (this process too) %.3f s: want the same CPU, > 0", d.harness, d.service)
	}
	if other := (cpuMeter{database: "no_such_database"}).read(); len(other.backends) != 0 {
		t.Errorf("backends of another database counted: %+v", other.backends)
	}
}

// requireLocalBackend stops a test that reads the backend pid from /proc
// when the server runs elsewhere: skipped on a developer's remote server,
// failed under `make test` (ENGRAM_TEST_REQUIRE_INFRA=1), whose server is
// local, so a meter that cannot see its backends is never a silent pass.
func requireLocalBackend(t testing.TB, pid int) {
	t.Helper()
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
		testenv.Missing(t, "the PostgreSQL server's backends as processes of this machine",
			fmt.Sprintf("backend %d: %v; run hack/pgvector.sh start on this machine", pid, err))
	}
}
