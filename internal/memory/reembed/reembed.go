// Package reembed is the storage side of re-embedding a tenant's vectors
// with another embedder (issue 29; docs/decisions.md, "Re-embedding on a
// model change"): a shadow column embedding_next of the new embedder's own
// dimensions on every table that carries an embedding, filled in bounded,
// resumable batches while every read keeps using the old column, then
// swapped in by one transaction (Switch), or dropped (Abort). The state is
// the one row of the tenant's reembed table (migration 20).
//
// Begin, Switch and Abort change the tables: they run as the tenant's
// owner role (Target.Owner), on the operator's connection. FillBatch and
// Progress need only the login role (Target.Login), which the service and
// the jobs hold with the embedder's credentials: Begin grants it INSERT
// and UPDATE on the shadow columns alone. The operator drives it (a
// spec.embedding change) and its re-embed Job fills, through the memory
// façade; meanwhile a service that knows the next embedder writes both
// columns (dual writes: internal/memory/core, dual.go).
package reembed

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Embedder names what made a vector: provider, model and dimensions.
type Embedder struct {
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Dimensions int    `json:"dimensions"`
}

func (e Embedder) String() string {
	return fmt.Sprintf("%s/%s (%d dimensions)", e.Provider, e.Model, e.Dimensions)
}

// Target is the tenant a re-embed runs on: its schema, its owner role (the
// role Begin, Switch and Abort take with SET ROLE; empty: the pool's own)
// and its login role (granted INSERT and UPDATE on the shadow columns by
// Begin).
type Target struct {
	Schema, Owner, Login string
	// LockTimeout bounds every wait for a lock (default 5 s), and
	// StatementTimeout every statement but a concurrent index build
	// (default 1 min); IndexTimeout bounds an index build (default 1 h).
	LockTimeout, StatementTimeout, IndexTimeout time.Duration
}

func (t Target) table(name string) string { return pgx.Identifier{t.Schema, name}.Sanitize() }

func (t Target) timeouts() (lock, stmt, index time.Duration) {
	lock, stmt, index = t.LockTimeout, t.StatementTimeout, t.IndexTimeout
	if lock <= 0 {
		lock = 5 * time.Second
	}
	if stmt <= 0 {
		stmt = time.Minute
	}
	if index <= 0 {
		index = time.Hour
	}
	return lock, stmt, index
}

// Phases of a tenant's re-embed.
const (
	PhaseIdle    = "idle"    // every vector is the current embedder's
	PhaseFilling = "filling" // the shadow columns are being filled
)

// Errors callers tell apart.
var (
	// ErrBusy: a re-embed to another embedder is under way (Abort it first).
	ErrBusy = errors.New("a re-embed to another embedder is under way")
	// ErrNotFilling: no re-embed is under way.
	ErrNotFilling = errors.New("no re-embed is under way")
	// ErrRowsLeft: Switch found rows without their new vector.
	ErrRowsLeft = errors.New("rows without their new vector remain")
	// ErrCurrent: Begin was asked for the embedder the vectors already have.
	ErrCurrent = errors.New("the vectors are already this embedder's")
	// ErrWrongEmbedder: a fill was given another embedder than Begin's.
	ErrWrongEmbedder = errors.New("the embedder is not the one the re-embed fills with")
	// ErrCitus: not supported on a Citus coordinator (docs/decisions.md).
	ErrCitus = errors.New("re-embedding a tenant on Citus is not supported yet")
)

// vectorTable is a table that carries an embedding: the text its vector is
// made of and the columns of its primary key, which a fill walks it by.
type vectorTable struct {
	name, text string
	key        []string
	notNull    bool // memories.embedding is NOT NULL; the others may be NULL (never embedded)
}

// vectorTables are every table with an embedding column (migrations 1, 6, 9).
var vectorTables = []vectorTable{
	{name: "memories", text: "content", key: []string{"id"}, notNull: true},
	{name: "messages", text: "content", key: []string{"owner_id", "session_id", "seq"}},
	{name: "summaries", text: "content", key: []string{"id"}},
	{name: "episodes", text: "summary", key: []string{"id"}},
}

// todoIndex is the partial index of a table's rows still without their new
// vector: the fill reads its batches through it, so a fill that resumes
// after a crash skips the filled rows without reading them, and Progress
// and Switch count the rows left without a scan of the table.
func todoIndex(t vectorTable) string { return t.name + "_reembed_todo_idx" }

// State is the tenant's reembed row.
type State struct {
	Current Embedder
	// Next is the embedder being filled in; zero when Phase is idle.
	Next       Embedder
	Phase      string
	Filled     int64 // rows the fill gave their new vector since Begin
	StartedAt  *time.Time
	SwitchedAt *time.Time
}

func readState(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, t Target, lock string) (State, error) {
	var s State
	var np, nm *string
	var nd, d *int
	err := db.QueryRow(ctx, `SELECT provider, model, dimensions, next_provider, next_model, next_dimensions,
		phase, filled, started_at, switched_at FROM `+t.table("reembed")+` `+lock).
		Scan(&s.Current.Provider, &s.Current.Model, &d, &np, &nm, &nd, &s.Phase, &s.Filled, &s.StartedAt, &s.SwitchedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, fmt.Errorf("reading %s: the row is missing", t.table("reembed"))
	}
	if err != nil {
		return s, fmt.Errorf("reading %s: %w", t.table("reembed"), err)
	}
	if d != nil {
		s.Current.Dimensions = *d
	}
	if np != nil && nm != nil && nd != nil {
		s.Next = Embedder{Provider: *np, Model: *nm, Dimensions: *nd}
	}
	return s, nil
}

// ReadState reads the tenant's re-embed state.
func ReadState(ctx context.Context, pool *pgxpool.Pool, t Target) (State, error) {
	var s State
	err := inTx(ctx, pool, t, false, func(tx pgx.Tx) error {
		var err error
		s, err = readState(ctx, tx, t, "")
		return err
	})
	return s, err
}

// inTx runs fn in one transaction as t.Owner (when set), with the
// transaction's lock and statement timeouts, committing on success.
func inTx(ctx context.Context, pool *pgxpool.Pool, t Target, asOwner bool, fn func(pgx.Tx) error) error {
	return inTxWith(ctx, pool, pgx.TxOptions{}, t, asOwner, fn)
}

// inSnapshot runs fn in one read-only REPEATABLE READ transaction: every
// statement of fn sees the same snapshot.
func inSnapshot(ctx context.Context, pool *pgxpool.Pool, t Target, fn func(pgx.Tx) error) error {
	return inTxWith(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, t, false, fn)
}

// inTxWith is inTx with the transaction's options.
func inTxWith(ctx context.Context, pool *pgxpool.Pool, opts pgx.TxOptions, t Target, asOwner bool, fn func(pgx.Tx) error) error {
	tx, err := pool.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	lock, stmt, _ := t.timeouts()
	set := fmt.Sprintf("SET LOCAL lock_timeout = %d; SET LOCAL statement_timeout = %d; SET LOCAL synchronous_commit = on",
		lock.Milliseconds(), stmt.Milliseconds())
	if asOwner && t.Owner != "" {
		set += "; SET LOCAL ROLE " + pgx.Identifier{t.Owner}.Sanitize()
	}
	if _, err := tx.Exec(ctx, set); err != nil {
		return fmt.Errorf("setting the transaction's timeouts: %w", err)
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// isCitus reports whether the database is a Citus coordinator.
func isCitus(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var citus bool
	err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus')`).Scan(&citus)
	if err != nil {
		return false, fmt.Errorf("looking for Citus: %w", err)
	}
	return citus, nil
}

// Named is the Embedder a re-embed records for a runtime's embedder: the
// builtin embedder has one model per size and no model name, so it is
// recorded under its provider's name.
func Named(provider, model string, dimensions int) Embedder {
	if model == "" {
		model = provider
	}
	return Embedder{Provider: provider, Model: model, Dimensions: dimensions}
}
