package tenant

// Relocation: one tenant's move to another PostgreSQL server (issue 29,
// "Moving a tenant"). The operator drives it in steps it may repeat
// (Prepare, Copy, CatchUp, Freeze, CatchUp, Verify, Finish, MarkMoved);
// every step is idempotent and bounded by Budget, so a crash or a pass
// timeout only means calling it again.

import (
	"context"
	"errors"
	"time"

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
// it as a home), with its secondary indexes dropped for the bulk copy.
// Idempotent. Refuses (errors.Is): ErrRelocateSameServer,
// ErrRelocateVersion, ErrRelocateCitus, ErrOwnedByOther/ErrNotManaged
// (target schema exists and is not our incoming copy), and a source not
// provably ours.
func (m Relocation) Prepare(ctx context.Context) error { return errors.New("not yet") }

// Copy bulk-copies every table (binary COPY source→target, in pk order,
// chunks each committed with its row map), resumable after a crash (each
// table restarts after the last copied pk); when all is copied it rebuilds
// the secondary indexes; done when rows and indexes are in place. Bounded
// by Budget.
func (m Relocation) Copy(ctx context.Context) (done bool, p RelocateProgress, err error) {
	return false, p, errors.New("not yet")
}

// CatchUp runs one pass: rows inserted, updated or deleted on the source
// since they were copied (xmin and pk compared with the target's row map)
// are applied to the target. It returns the number of rows it applied.
func (m Relocation) CatchUp(ctx context.Context) (delta int64, err error) {
	return 0, errors.New("not yet")
}

// Freeze makes the tenant's login role read-only on the source (durable: it
// survives an operator crash; a write gets SQLSTATE 25006, the service
// answers 503 and the client retries), waits for in-flight write
// transactions, and ends the login role's sessions in that database so
// every new one is read-only. Idempotent.
func (m Relocation) Freeze(ctx context.Context) error { return errors.New("not yet") }

// Unfreeze undoes Freeze exactly (the grants Provision gives).
func (m Relocation) Unfreeze(ctx context.Context) error { return errors.New("not yet") }

// Frozen reports whether the source is frozen.
func (m Relocation) Frozen(ctx context.Context) (bool, error) { return false, errors.New("not yet") }

// Verify compares, table by table, exact row counts and an
// order-independent checksum of every column (vectors included) on both
// servers; a difference is ErrRelocateMismatch naming the table.
func (m Relocation) Verify(ctx context.Context) (RelocateCheck, error) {
	return RelocateCheck{}, errors.New("not yet")
}

// Finish makes the target the tenant's home: identities set past the copied
// ids, triggers as provisioned, the row map dropped, the schema marker
// rewritten to this runtime's normal marker. Idempotent.
func (m Relocation) Finish(ctx context.Context) error { return errors.New("not yet") }

// MarkMoved rewrites the source schema's marker to uid=<UID>+moved;
// to=<identity>: HoldsTenant and Provision no longer take it as this
// runtime's home; DropMoved can drop it. The source stays read-only.
func (m Relocation) MarkMoved(ctx context.Context, to ServerIdentity) error {
	return errors.New("not yet")
}

// DropIncoming drops the target's incoming schema and its roles (abort),
// only if the schema carries this runtime's incoming marker.
func (m Relocation) DropIncoming(ctx context.Context) error { return errors.New("not yet") }

// DropMoved drops the source's moved copy and its roles, only if marked
// moved by this runtime.
func (m Relocation) DropMoved(ctx context.Context) error { return errors.New("not yet") }
