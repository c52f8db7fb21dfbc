package tenant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrConnectionShareExhausted: the namespace already has as many runtimes
// on the server as its connection share has slots, for errors.Is.
var ErrConnectionShareExhausted = errors.New("the namespace's connection share is exhausted")

// ConnectionShareExhaustedError refuses a runtime beyond what its
// namespace's connection share can hold on one server: every login role
// gets at least one connection, so without this a namespace with more
// runtimes than its share has slots held one slot per runtime, up to
// every slot of the server (issue 26's fifth review, MEDIUM 1).
type ConnectionShareExhaustedError struct {
	Namespace string
	// Share is the percentage, Slots the server's non-reserved slots,
	// Capacity the runtimes the share holds (one slot each at least).
	Share, Slots, Capacity int
	// Roles is how many login roles the namespace's runtimes have on the
	// server, this one's included (one per runtime; two on a Citus
	// cluster, where the owner role logs in too).
	Roles int
}

func (e *ConnectionShareExhaustedError) Error() string {
	return fmt.Sprintf("namespace %s may hold %d connection(s) on this server (--tenant-connection-share %d %% of its %d connection slots) "+
		"and its runtimes there would have %d login role(s) with this one's, each needing at least one: delete a runtime of the namespace, "+
		"or the platform team raises --tenant-connection-share or the server's max_connections",
		e.Namespace, e.Capacity, e.Share, e.Slots, e.Roles)
}

func (e *ConnectionShareExhaustedError) Is(target error) bool {
	return target == ErrConnectionShareExhausted
}

// shareCapacity is how many connections, and so login roles, the share
// of one namespace holds on a server with slots slots: at least one, so a
// namespace is never shut out of a small server; -1 means no bound.
func (p ConnectionPolicy) shareCapacity(slots int) int {
	share := p.Share
	switch {
	case share < 0:
		return -1
	case share == 0:
		share = DefaultConnectionShare
	}
	return max(slots*min(share, 100)/100, 1)
}

// admitRuntime refuses a runtime whose login role(s) would give its
// namespace more login roles on this server than its share holds (each
// gets at least one connection). Called before the roles are created:
// nothing is written then. perRuntime is how many login roles a runtime
// has (1; 2 on Citus, where the owner role logs in too). Runtimes, not
// roles, are ranked: a runtime whose roles exist (created before this
// bound, or by a concurrent pass of the same namespace) keeps its place by
// its oldest role (lowest OID), and the newest beyond the share are
// refused. Ranking single roles refused every racer on Citus: concurrent
// passes create their owner roles first, so every login role ranked behind
// the others' owner roles.
func admitRuntime(ctx context.Context, conn *pgx.Conn, p ConnectionPolicy, owner Owner, perRuntime int) error {
	slots, err := connectionSlots(ctx, conn)
	if err != nil {
		return err
	}
	capacity := p.shareCapacity(slots)
	if capacity < 0 {
		return nil
	}
	capacity = max(capacity, perRuntime) // one runtime always fits
	roles, err := rolesOfNamespace(ctx, conn, owner.Namespace)
	if err != nil {
		return err
	}
	older, total := rolesBefore(roles, owner.UID, perRuntime)
	if older+perRuntime <= capacity {
		return nil
	}
	return &ConnectionShareExhaustedError{Namespace: owner.Namespace, Share: shareOf(p), Slots: slots, Capacity: capacity, Roles: total}
}

// rolesBefore counts the login roles of the runtimes older than uid's (by
// their oldest role; all of them when uid has none yet) and of every
// runtime with uid's. A runtime counts at least perRuntime: a concurrent
// pass may not have created or marked its second role yet.
func rolesBefore(roles []namespaceRole, uid string, perRuntime int) (older, total int) {
	first := map[string]uint32{}
	count := map[string]int{}
	for _, r := range roles {
		if f, ok := first[r.uid]; !ok || r.oid < f {
			first[r.uid] = r.oid
		}
		count[r.uid]++
	}
	mine, placed := first[uid]
	for id, f := range first {
		n := max(count[id], perRuntime)
		total += n
		if id != uid && (!placed || f < mine) {
			older += n
		}
	}
	if !placed {
		total += perRuntime
	}
	return older, total
}

// admitAndCreateRoles admits the runtime to its namespace's connection
// share and creates its roles. A pass that creates the login role holds
// the namespace's admission lease from the count to the marked roles:
// passes of one namespace (the operator reconciles several runtimes at
// once) each counted the roles before the others' existed and all created
// theirs, beyond the share (issue 26's sixth review, L1). Ranking by OID
// afterwards could not settle it: a role's OID is taken when CREATE ROLE
// starts and the role counts only once it is committed with its marker,
// so a role with a lower OID could appear after a racer had already
// counted (on Citus, where CREATE ROLE commits on every node, two of four
// racers were admitted). The lease is a row of the admin-only control
// schema, not an advisory lock a tenant could take. Passes over an
// existing runtime create nothing and take no lease. The lease is the
// database's and roles are the server's: passes of one namespace on two
// databases of one server are not serialised by it, only by the operator
// reconciling one runtime per namespace at a time, and past that (an old
// and a new leader overlapping) by the re-check below.
func admitAndCreateRoles(ctx context.Context, conn *pgx.Conn, spec Spec, names roleNames, plan tenantPlan, citus bool, res *Result) error {
	perRuntime := 1
	if citus {
		perRuntime = 2 // the owner role logs in too (ownerLogin)
	}
	if plan.login == claimCreate {
		l := admissionLease(spec.Owner.Namespace)
		holder, err := takeLease(ctx, conn, l)
		if err != nil {
			return err
		}
		defer releaseLease(conn, l.key, holder)
	}
	if err := admitRuntime(ctx, conn, spec.Connections, spec.Owner, perRuntime); err != nil {
		return err
	}
	if err := ensureRoles(ctx, conn, spec.Owner, names, plan, citus, spec.after, res); err != nil {
		return err
	}
	// Again now that the roles exist: a pass that takes no lease (an
	// operator of an older version during an upgrade) may have been
	// admitted against the same count.
	return readmitCreated(ctx, conn, spec.Connections, spec.Owner, names, plan, perRuntime)
}

// admissionLease is the lease of a namespace's admissions. Its key holds
// a "/", which is never in a schema name (ValidSchemaName), so it cannot
// be a schema's. It guards a handful of statements, so it lasts
// admissionLeaseTTL, not the pass's deadline: a holder whose session
// lives on without it (a half-open connection after a node is lost)
// holds up the namespace's new runtimes for that long, not for a pass.
func admissionLease(namespace string) lease {
	return lease{key: "admission/" + namespace, doing: fmt.Sprintf("admitting a runtime of namespace %q", namespace), ttl: admissionLeaseTTL}
}

// admissionLeaseTTL is far longer than the statements the admission lease
// guards take (each bounded by the admin session's statement_timeout).
const admissionLeaseTTL = 2 * time.Minute

// readmitCreated checks the share once more after this pass created the
// runtime's login role, and drops the roles it created when they rank
// beyond it, ranking by OID (the oldest keep their place). Passes of one
// database are serialised by the admission lease and always pass here; it
// catches what the lease does not serialise, as far as OIDs and commits
// allow.
// Nothing else was created yet, so the refusal leaves nothing.
func readmitCreated(ctx context.Context, conn *pgx.Conn, p ConnectionPolicy, owner Owner, names roleNames, plan tenantPlan, perRuntime int) error {
	if plan.login != claimCreate {
		return nil
	}
	refused := admitRuntime(ctx, conn, p, owner, perRuntime)
	if refused == nil || !errors.Is(refused, ErrConnectionShareExhausted) {
		return refused
	}
	for _, r := range []struct {
		name   string
		action claimAction
	}{{names.login, plan.login}, {names.owner, plan.owner}} {
		if r.action != claimCreate {
			continue
		}
		if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{r.name}.Sanitize()); err != nil {
			return errors.Join(refused, fmt.Errorf("dropping role %q, created beyond the share by a concurrent pass: %w", r.name, err))
		}
	}
	return refused
}
