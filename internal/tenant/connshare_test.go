package tenant

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestConnectionLimitNeverAboveTheShare (issue 26's fourth review, HIGH 1):
// the runtime's need came from spec.service.replicas, which the tenant
// writes, and raised the limit: replicas 4 gave 101 connections on a
// 100-connection server, every slot. Now the limit stays within the share
// of the server's slots whatever the need, and the shortfall names both
// numbers and what the platform team can do.
func TestConnectionLimitNeverAboveTheShare(t *testing.T) {
	pool, url := adminPool(t)
	a := newSpec(uniqueSchema(t, "engram_share_a"), 3)
	a.Connections = ConnectionPolicy{Need: 2*4*10 + 16 + 5} // replicas: 4
	resA := mustProvision(t, pool, url, a)
	slots := serverSlots(t, pool)
	if share := slots * DefaultConnectionShare / 100; resA.ConnectionLimit > share || resA.ConnectionLimit < 1 {
		t.Fatalf("A's connection limit = %d with replicas 4; want at most %d (%d %% of the server's %d slots)", resA.ConnectionLimit, share, DefaultConnectionShare, slots)
	}
	if resA.ConnectionLimit < a.Connections.Need {
		for _, want := range []string{"needs up to 101 connections", "may open " + strconv.Itoa(resA.ConnectionLimit), "--tenant-connection-share", "max_connections"} {
			if !strings.Contains(resA.ConnectionShortfall, want) {
				t.Errorf("the shortfall %q does not say %q", resA.ConnectionShortfall, want)
			}
		}
	}
}

// TestConnectionLimitIsSharedByANamespace (issue 26's fourth review,
// HIGH 1): a team may create as many runtimes as it likes, each with a
// login role of its own; three at the share each took more than every
// slot. The runtimes of one namespace on one server now divide the share:
// provisioning the second lowers the first's limit, together they stay
// within it, and each is refused beyond its part while a runtime of
// another namespace still connects.
func TestConnectionLimitIsSharedByANamespace(t *testing.T) {
	ctx := testCtx(t)
	pool, url := adminPool(t)
	policy := ConnectionPolicy{Share: 4} // a few connections: the shared server is not crowded
	a1 := newSpec(uniqueSchema(t, "engram_nsshare_a1"), 3)
	a1.Connections = policy
	res1 := mustProvision(t, pool, url, a1)
	a2 := newSpec(uniqueSchema(t, "engram_nsshare_a2"), 3)
	a2.Owner.Namespace = a1.Owner.Namespace
	a2.Connections = policy
	res2 := mustProvision(t, pool, url, a2)
	resB := mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_nsshare_b"), 3))

	limits := map[string]int{}
	rows, err := pool.Query(ctx, `SELECT rolname, rolconnlimit FROM pg_roles WHERE rolname = ANY($1)`, []string{res1.LoginRole, res2.LoginRole})
	if err != nil {
		t.Fatal(err)
	}
	var name string
	var limit int
	if _, err := pgx.ForEachRow(rows, []any{&name, &limit}, func() error { limits[name] = limit; return nil }); err != nil {
		t.Fatal(err)
	}
	slots := serverSlots(t, pool)
	share := max(slots*policy.Share/100, 2)
	if sum := limits[res1.LoginRole] + limits[res2.LoginRole]; sum > share || limits[res1.LoginRole] != res2.ConnectionLimit {
		t.Fatalf("the limits of one namespace's two runtimes: %v (the second's provisioning gave %d); want equal parts, together at most the share of %d", limits, res2.ConnectionLimit, share)
	}
	for range res2.ConnectionLimit {
		loginConn(t, url, res1, res1.Password)
	}
	extra, err := pgx.Connect(ctx, testenv.WithUser(url, res1.LoginRole, res1.Password))
	mustRefuseLogin(t, fmt.Sprintf("the first runtime's connection %d, over its part of %d", res2.ConnectionLimit+1, res2.ConnectionLimit), extra, err)
	if _, err := queryAs(ctx, url, resB); err != nil {
		t.Fatalf("a runtime of another namespace: %v", err)
	}
}

// TestManyRuntimesCannotTakeEverySlot (issue 26's fifth review, MEDIUM 1):
// each login role gets at least one connection, so a namespace with more
// runtimes than its share has slots held one slot per runtime, up to every
// slot of the server. Now the runtime beyond the share is refused before
// its role exists, with ErrConnectionShareExhausted naming the share; the
// namespace's limits add up to at most the share and another namespace
// connects.
func TestManyRuntimesCannotTakeEverySlot(t *testing.T) {
	ctx := testCtx(t)
	pool, url := adminPool(t)
	policy, slots, capacity, perRuntime := onePercentShare(t, pool)
	ns := "ns-" + uniqueSchema(t, "many")
	var team []*Result
	for i := range capacity / perRuntime {
		s := newSpec(uniqueSchema(t, fmt.Sprintf("engram_many_%d", i)), 3)
		s.Owner.Namespace, s.Connections = ns, policy
		team = append(team, mustProvision(t, pool, url, s))
	}
	over := newSpec(uniqueSchema(t, "engram_many_over"), 3)
	over.Owner.Namespace, over.Connections = ns, policy
	dropRolesAfter(t, url, over.Schema)
	_, err := Provision(ctx, pool, over)
	var exhausted *ConnectionShareExhaustedError
	if !errors.As(err, &exhausted) || !errors.Is(err, ErrConnectionShareExhausted) {
		t.Fatalf("provisioning runtime %d of a namespace whose share holds %d login roles: %v; want ConnectionShareExhaustedError", len(team)+1, capacity, err)
	}
	for _, want := range []string{"--tenant-connection-share 1 %", strconv.Itoa(slots) + " connection slots", strconv.Itoa((len(team)+1)*perRuntime) + " login role(s)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, LoginRole(over.Schema)).Scan(&exists); err != nil || exists {
		t.Fatalf("the refused runtime's login role exists: %v, %v; want nothing created", exists, err)
	}
	var sum int
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(rolconnlimit), 0) FROM pg_roles WHERE rolcanlogin AND rolname = ANY($1)`,
		loginRoles(team)).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum > capacity {
		t.Fatalf("the namespace's login roles may open %d connections together; want at most its share of %d", sum, capacity)
	}
	if _, err := queryAs(ctx, url, mustProvision(t, pool, url, newSpec(uniqueSchema(t, "engram_many_b"), 3))); err != nil {
		t.Fatalf("a runtime of another namespace: %v", err)
	}
}

func loginRoles(rs []*Result) []string {
	out := make([]string, 0, 2*len(rs))
	for _, r := range rs {
		out = append(out, r.LoginRole, r.OwnerRole)
	}
	return out
}

// TestConcurrentAdmissionsKeepTheShare (issue 26's sixth review, L1):
// admitRuntime reads the namespace's roles before this pass creates its
// own, and the lease is per schema, so four passes of one namespace one
// runtime below its share all saw room and all created their roles: the
// namespace's login roles outnumbered its share. Now each pass checks
// again after creating its role and drops it when it ranks beyond the
// share: exactly one of the four is admitted, the others are refused with
// ConnectionShareExhaustedError and leave no role, and the namespace's
// limits add up to at most its share.
func TestConcurrentAdmissionsKeepTheShare(t *testing.T) {
	ctx := testCtx(t)
	url := testenv.NewDatabase(t)
	pool := testenv.NewPool(t, url, 8)
	policy, _, capacity, perRuntime := onePercentShare(t, pool)
	ns := "ns-" + uniqueSchema(t, "race")
	spec := func(name string) Spec {
		s := newSpec(uniqueSchema(t, name), 3)
		s.Owner.Namespace, s.Connections = ns, policy
		return s
	}
	for i := range capacity/perRuntime - 1 { // one runtime below the share
		mustProvision(t, pool, url, spec(fmt.Sprintf("engram_race_%d", i)))
	}
	racers := make([]Spec, 4)
	errs := make([]error, len(racers))
	var wg sync.WaitGroup
	for i := range racers {
		racers[i] = spec(fmt.Sprintf("engram_race_c%d", i))
		dropRolesAfter(t, url, racers[i].Schema)
		wg.Go(func() { _, errs[i] = Provision(ctx, pool, racers[i]) })
	}
	wg.Wait()
	admitted := 0
	for i, err := range errs {
		var exhausted *ConnectionShareExhaustedError
		switch {
		case err == nil:
			admitted++
		case errors.As(err, &exhausted):
			var exists bool
			if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = ANY($1))`,
				[]string{LoginRole(racers[i].Schema), OwnerRole(racers[i].Schema)}).Scan(&exists); err != nil || exists {
				t.Errorf("the refused racer %s left its roles: %v, %v; want none", racers[i].Schema, exists, err)
			}
		default:
			t.Errorf("racer %s: %v; want success or ConnectionShareExhaustedError", racers[i].Schema, err)
		}
	}
	if admitted != 1 {
		t.Errorf("%d of 4 concurrent passes admitted with room for one runtime; want 1", admitted)
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	roles, err := rolesOfNamespace(ctx, c.Conn(), ns)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0
	for _, r := range roles {
		sum += r.limit
	}
	if len(roles) > capacity || sum > capacity {
		t.Errorf("the namespace has %d login roles whose limits add up to %d; its share holds %d", len(roles), sum, capacity)
	}
}

// TestAdmissionCountsARoleNotYetMarked (the CI's Citus pass, 2026-11-27):
// a role's OID is taken when its CREATE ROLE starts, but other passes
// count it only once it is committed and marked. Two of four racers were
// admitted on Citus, where CREATE ROLE commits on every node: a racer
// counted before an older role showed, and the recheck by OID then let
// both keep their place. Here the first pass stops between creating its
// login role and marking it while a second pass of the namespace runs:
// the second waits for the namespace's admission lease, then counts the
// first and is refused; the first is admitted. Without the lease the
// second counts nothing, is admitted, and the first, older by OID, is too.
func TestAdmissionCountsARoleNotYetMarked(t *testing.T) {
	ctx := testCtx(t)
	url := testenv.NewDatabase(t)
	pool := testenv.NewPool(t, url, 8)
	policy, _, capacity, perRuntime := onePercentShare(t, pool)
	ns := "ns-" + uniqueSchema(t, "gap")
	spec := func(name string) Spec {
		s := newSpec(uniqueSchema(t, name), 3)
		s.Owner.Namespace, s.Connections = ns, policy
		dropRolesAfter(t, url, s.Schema)
		return s
	}
	for i := range capacity/perRuntime - 1 { // one runtime below the share
		mustProvision(t, pool, url, spec(fmt.Sprintf("engram_gap_%d", i)))
	}
	first, second := spec("engram_gap_first"), spec("engram_gap_second")
	paused, resume := make(chan struct{}), make(chan struct{})
	var pause sync.Once
	first.FailAfter = func(step string) error {
		if step == "login role created, not marked" {
			pause.Do(func() { close(paused); <-resume })
		}
		return nil
	}
	firstDone, secondDone := make(chan error, 1), make(chan error, 1)
	go func() { _, err := Provision(ctx, pool, first); firstDone <- err }()
	select {
	case <-paused:
	case err := <-firstDone:
		t.Fatalf("the first pass ended before creating its login role: %v", err)
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	go func() { _, err := Provision(ctx, pool, second); secondDone <- err }()
	var errSecond error
	select {
	case errSecond = <-secondDone: // it did not wait: the first is not counted
		close(resume)
	case <-time.After(2 * time.Second): // waiting for the lease (it waits up to lockWait)
		close(resume)
		errSecond = <-secondDone
	}
	if err := <-firstDone; err != nil {
		t.Errorf("the first pass: %v; want admitted (it counted first)", err)
	}
	if !errors.Is(errSecond, ErrConnectionShareExhausted) {
		t.Errorf("the second pass, run while the first's role was created but not marked: %v; want ConnectionShareExhaustedError", errSecond)
	}
}

// TestRoleIsCreatedWithItsMarker (hostile review 17): a role and its
// marker were two statements, so a pass that ended between them (a
// cancelled context, an operator shut down) left a role Engram could not
// prove was its own, and every later pass refused the runtime for good
// (ErrNotManaged). Both now commit together: a pass cut right after the
// CREATE leaves no role, and the next pass provisions the runtime.
func TestRoleIsCreatedWithItsMarker(t *testing.T) {
	ctx := testCtx(t)
	pool, url := adminPool(t)
	spec := newSpec(uniqueSchema(t, "engram_marked"), 3)
	dropRolesAfter(t, url, spec.Schema)
	spec.FailAfter = func(step string) error {
		if step == "login role created, not marked" {
			return errors.New("the operator stops here")
		}
		return nil
	}
	if _, err := Provision(ctx, pool, spec); err == nil {
		t.Fatal("the injected stop did not end the pass")
	}
	var left []string
	rows, err := pool.Query(ctx, `SELECT rolname FROM pg_roles WHERE rolname = ANY($1)`, []string{LoginRole(spec.Schema), OwnerRole(spec.Schema)})
	if err != nil {
		t.Fatal(err)
	}
	if left, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if testenv.OnCitus() && len(left) != 0 || !testenv.OnCitus() && !slices.Equal(left, []string{OwnerRole(spec.Schema)}) {
		// On Citus the owner logs in too: the stop comes at its CREATE.
		t.Fatalf("roles left by a pass stopped between a login role's CREATE and its marker: %v; want only the marked roles created before it", left)
	}
	spec.FailAfter = nil
	if res := mustProvision(t, pool, url, spec); res.Password == "" {
		t.Fatalf("the next pass: no password; changes %v", res.Changes)
	}
}

// onePercentShare is a share of 1 % of the slots of pool's server (a few
// runtimes): its policy, the server's slots, the share's capacity, and the
// slots one runtime takes (its login; on Citus its owner logs in too).
func onePercentShare(t *testing.T, pool *pgxpool.Pool) (policy ConnectionPolicy, slots, capacity, perRuntime int) {
	t.Helper()
	policy = ConnectionPolicy{Share: 1}
	slots = serverSlots(t, pool)
	capacity = policy.shareCapacity(slots)
	perRuntime = 1
	if testenv.OnCitus() {
		perRuntime = 2
	}
	return policy, slots, capacity, perRuntime
}

// serverSlots is the shared server's connection slots open to
// non-superusers, as provisioning counts them.
func serverSlots(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	ctx := testCtx(t)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	slots, err := connectionSlots(ctx, conn.Conn())
	if err != nil {
		t.Fatal(err)
	}
	return slots
}
