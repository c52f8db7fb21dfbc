package tenant

// Relocation: one tenant's move to another PostgreSQL server (issue 29,
// "Moving a tenant"). The operator drives it in steps it may repeat
// (Prepare, Copy, CatchUp, Freeze, CatchUp, Verify, Finish, MarkMoved);
// every step is idempotent and bounded by Budget, so a crash or a pass
// timeout only means calling it again.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors of a relocation, for errors.Is.
var (
	// ErrRelocateSameServer: source and target are one server (roles are
	// server-wide: moving within a server would share them).
	ErrRelocateSameServer = errors.New("the target is the tenant's own server")
	// ErrRelocateVersion: source and target schemas are at different
	// migration versions (the source behind the binary: wait for it).
	ErrRelocateVersion = errors.New("the schema versions of source and target differ")
	// ErrRelocateCitus: a side is a Citus cluster (its tenants move by the
	// Citus worker move, not by a copy).
	ErrRelocateCitus = errors.New("a server of the move is a Citus cluster")
	// ErrRelocateSchemaMismatch: a source table lacks a column of the
	// target's, or differs in type: nothing is copied.
	ErrRelocateSchemaMismatch = errors.New("the source's tables do not match the target's")
	// ErrRelocateMismatch: Verify found a table whose rows differ.
	ErrRelocateMismatch = errors.New("the copy differs from the source")
	// ErrRelocateNotIncoming: the target schema is not this runtime's
	// incoming copy (it may be home already: Finish is done).
	ErrRelocateNotIncoming = errors.New("the target schema is not this runtime's incoming copy")
	// ErrRelocateNotFrozen: the final steps need the source frozen.
	ErrRelocateNotFrozen = errors.New("the source is not frozen")
	// ErrRelocateSourceNotHome: the source server does not hold the
	// schema as this runtime's home (nothing to move from there).
	ErrRelocateSourceNotHome = errors.New("the source does not hold the tenant as this runtime's")
	// ErrRelocateNotCopied: a step that needs the bulk copy done came first.
	ErrRelocateNotCopied = errors.New("the bulk copy is not finished")
)

// Relocation is one tenant's move from the source server to the target
// server (both admin pools).
type Relocation struct {
	Schema string
	Owner  Owner
	// Claim proves the source schema is this runtime's (as Provision would take it).
	Claim Claim
	// Source is an admin pool on the tenant's current server (its home).
	Source *pgxpool.Pool
	// Target is an admin pool on the new server.
	Target *pgxpool.Pool
	// Provision says how to provision the target (Schema, Dimensions,
	// Owner, Connections, TempFileLimit, TextSearchConfig...).
	Provision Spec
	// Budget bounds how long one call may work before returning (the
	// operator calls again); 0: no bound.
	Budget time.Duration
	// Progress, optional, is called at most every few seconds.
	Progress func(RelocateProgress)
	// ChunkRows is the number of rows per committed copy chunk; 0: relocateChunk.
	ChunkRows int
}

// RelocateProgress is where a relocation stands, for status.
type RelocateProgress struct {
	Step                  string
	CopiedRows, TotalRows int64
	Passes                int
	LastDelta             int64
}

// RelocateCheck is what Verify compared.
type RelocateCheck struct {
	Rows     int64
	Tables   int
	Checksum string
}

// Prepare provisions the target schema and roles marked "incoming" (schema
// marker uid=<UID>+incoming, so nothing, not even an older operator, takes
// it as a home), with its secondary indexes and foreign keys taken off for
// the bulk copy (recorded on the target, put back by Copy and Finish) and
// its tables emptied. Idempotent: a prepared target is left as it is.
// Refuses (errors.Is): ErrRelocateSameServer, ErrRelocateVersion,
// ErrRelocateCitus, ErrOwnedByOther/ErrNotManaged (the target schema exists
// and is not our incoming copy; ErrRelocateNotIncoming when it is our home
// already), ErrRelocateSourceNotHome.
func (m Relocation) Prepare(ctx context.Context) error {
	if err := m.validate(); err != nil {
		return err
	}
	if err := m.checkServers(ctx); err != nil {
		return fmt.Errorf("preparing the move of schema %q: %w", m.Schema, err)
	}
	prepared, err := m.targetPrepared(ctx)
	if err != nil || prepared {
		return err
	}
	spec := m.Provision
	spec.Schema, spec.Owner, spec.Claim = m.Schema, m.Owner, Claim{incoming: true}
	if _, err := Provision(ctx, m.Target, spec); err != nil {
		return fmt.Errorf("preparing the move's target: %w", err)
	}
	err = withTenantLock(ctx, m.Target, m.Schema, func(conn *pgx.Conn) error {
		if err := m.mustBeIncoming(ctx, conn); err != nil {
			return err
		}
		if err := ensureRelocateTables(ctx, conn); err != nil {
			return err
		}
		return relocTx(ctx, conn, false, relocateStmtTimeout, func(tx pgx.Tx) error { return m.stripTarget(ctx, tx) })
	})
	if err != nil {
		return fmt.Errorf("preparing the move's target: %w", err)
	}
	return nil
}

func (m Relocation) validate() error {
	if !ValidSchemaName(m.Schema) {
		return fmt.Errorf("moving schema %q: invalid schema name", m.Schema)
	}
	if m.Owner.UID == "" || m.Source == nil || m.Target == nil {
		return fmt.Errorf("moving schema %q: owner UID, source and target are required", m.Schema)
	}
	return nil
}

// checkServers refuses a move between one server's databases, to or from
// Citus, from a source that is not the tenant's home or whose schema is
// not at this binary's version.
func (m Relocation) checkServers(ctx context.Context) error {
	src, err := Identify(ctx, m.Source)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	dst, err := Identify(ctx, m.Target)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	same := src.Verifiable(dst) && src.System == dst.System
	if !src.Verifiable(dst) {
		// Without system identifiers: one server has one start time and
		// one catalog of roles.
		var a, b string
		q := `SELECT pg_postmaster_start_time()::text || '/' || (SELECT oid FROM pg_roles WHERE rolname = current_user)::text`
		if err := m.Source.QueryRow(ctx, q).Scan(&a); err != nil {
			return fmt.Errorf("source: %w", err)
		}
		if err := m.Target.QueryRow(ctx, q).Scan(&b); err != nil {
			return fmt.Errorf("target: %w", err)
		}
		same = a == b
	}
	if same {
		return fmt.Errorf("%w: %s and %s (roles are shared by a server's databases)", ErrRelocateSameServer, src, dst)
	}
	for _, side := range []struct {
		name string
		pool *pgxpool.Pool
	}{{"source", m.Source}, {"target", m.Target}} {
		c, err := DetectCitus(ctx, side.pool)
		if err != nil {
			return fmt.Errorf("%s: %w", side.name, err)
		}
		if c.Installed {
			return fmt.Errorf("%w: the %s", ErrRelocateCitus, side.name)
		}
	}
	home, err := HoldsTenant(ctx, m.Source, m.Schema, m.Owner, m.Claim)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if !home {
		return fmt.Errorf("%w: schema %q on %s", ErrRelocateSourceNotHome, m.Schema, src)
	}
	v, err := currentVersion(ctx, m.Source, m.Schema)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	if v != LatestVersion {
		return fmt.Errorf("%w: the source schema is at version %d, this operator migrates to %d (wait for the source's migration)", ErrRelocateVersion, v, LatestVersion)
	}
	return nil
}

// targetPrepared reports whether the target schema is this runtime's
// incoming copy and Prepare has finished with it; a target schema that is
// this runtime's home already is ErrRelocateNotIncoming.
func (m Relocation) targetPrepared(ctx context.Context) (bool, error) {
	c, err := m.Target.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("connecting to the target: %w", err)
	}
	defer c.Release()
	exists, mk, err := schemaState(ctx, c.Conn(), m.Schema)
	if err != nil || !exists {
		return false, err
	}
	if mk.uid == m.Owner.UID {
		return false, fmt.Errorf("%w: schema %q on the target is this runtime's home", ErrRelocateNotIncoming, m.Schema)
	}
	if mk.relocate != relocateIncoming || mk.relocateUID != m.Owner.UID {
		return false, nil // Provision says why it is not ours
	}
	var tbl bool
	if err := c.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", relocTable("relocate_state")).Scan(&tbl); err != nil || !tbl {
		return false, err
	}
	var prepared bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+relocTable("relocate_state")+" WHERE schema_name = $1 AND kind = 'prepared')",
		m.Schema).Scan(&prepared); err != nil {
		return false, fmt.Errorf("reading the move's state: %w", err)
	}
	return prepared, nil
}

// mustBeIncoming refuses a target schema that is not this runtime's
// incoming copy (checked under the target's provisioning lease).
func (m Relocation) mustBeIncoming(ctx context.Context, conn *pgx.Conn) error {
	exists, mk, err := schemaState(ctx, conn, m.Schema)
	if err != nil {
		return err
	}
	if !exists || mk.relocate != relocateIncoming || mk.relocateUID != m.Owner.UID {
		return fmt.Errorf("%w: schema %q", ErrRelocateNotIncoming, m.Schema)
	}
	return nil
}

// stripTarget records and takes off the target's secondary indexes and
// foreign keys and empties its tables (the migrations' default rows
// included: the source's are copied), once.
func (m Relocation) stripTarget(ctx context.Context, tx pgx.Tx) error {
	// Definitions read and replayed with this search_path are qualified.
	if _, err := tx.Exec(ctx, "SET LOCAL search_path = pg_catalog"); err != nil {
		return err
	}
	var done bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+relocTable("relocate_state")+" WHERE schema_name = $1 AND kind = 'prepared')",
		m.Schema).Scan(&done); err != nil || done {
		return err
	}
	for _, t := range []string{"relocate_state", "relocate_rows", "relocate_scan"} {
		if _, err := tx.Exec(ctx, "DELETE FROM "+relocTable(t)+" WHERE schema_name = $1", m.Schema); err != nil {
			return fmt.Errorf("clearing an earlier move's state: %w", err)
		}
	}
	type obj struct{ kind, name, def, drop string }
	rows, err := tx.Query(ctx, `SELECT 'fk', c.conrelid::regclass::text || '.' || c.conname,
			format('ALTER TABLE %s ADD CONSTRAINT %I %s', c.conrelid::regclass, c.conname, pg_get_constraintdef(c.oid)),
			format('ALTER TABLE %s DROP CONSTRAINT %I', c.conrelid::regclass, c.conname)
		FROM pg_constraint c WHERE c.contype = 'f' AND c.connamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
		UNION ALL
		SELECT 'index', ci.relname::text, pg_get_indexdef(i.indexrelid), format('DROP INDEX %s', i.indexrelid::regclass)
		FROM pg_index i JOIN pg_class ci ON ci.oid = i.indexrelid
		WHERE ci.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1) AND NOT i.indisprimary
			AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
		ORDER BY 1, 2`, m.Schema)
	if err != nil {
		return fmt.Errorf("reading the target's indexes and foreign keys: %w", err)
	}
	objs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (obj, error) {
		var o obj
		return o, r.Scan(&o.kind, &o.name, &o.def, &o.drop)
	})
	if err != nil {
		return fmt.Errorf("reading the target's indexes and foreign keys: %w", err)
	}
	for _, o := range objs { // foreign keys first ("fk" < "index")
		if err := setState(ctx, tx, m.Schema, o.kind, o.name, o.def); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, o.drop); err != nil {
			return fmt.Errorf("%s: %w", o.drop, err)
		}
	}
	var tables string
	if err := tx.QueryRow(ctx, `SELECT string_agg(c.oid::regclass::text, ', ' ORDER BY c.relname) FROM pg_class c
		WHERE c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1) AND c.relkind IN ('r', 'p')`, m.Schema).Scan(&tables); err != nil {
		return fmt.Errorf("listing the target's tables: %w", err)
	}
	if _, err := tx.Exec(ctx, "TRUNCATE "+tables); err != nil {
		return fmt.Errorf("emptying the target's tables: %w", err)
	}
	return setState(ctx, tx, m.Schema, "prepared", "", "")
}

// deadline is when a call must stop starting work (zero: no bound).
func (m Relocation) deadline() time.Time {
	if m.Budget <= 0 {
		return time.Time{}
	}
	return time.Now().Add(m.Budget)
}

func past(dl time.Time) bool { return !dl.IsZero() && time.Now().After(dl) }

// reporter calls Progress at most every progressEvery.
type reporter struct {
	fn   func(RelocateProgress)
	last time.Time
}

const progressEvery = 3 * time.Second

func (r *reporter) report(p RelocateProgress, force bool) {
	if r.fn == nil || (!force && time.Since(r.last) < progressEvery) {
		return
	}
	r.last = time.Now()
	r.fn(p)
}
