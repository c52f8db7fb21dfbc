package tenant

import (
	"context"
	"errors"
)

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
