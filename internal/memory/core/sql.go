package core

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Args numbers query parameters as they are added.
type Args struct{ List []any }

// Add appends v and returns its placeholder ("$3").
func (a *Args) Add(v any) string {
	a.List = append(a.List, v)
	return "$" + strconv.Itoa(len(a.List))
}

// Querier runs one query of one row: a pool, a transaction or a pipelined
// transaction's connection.
type Querier interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

// RowsQuerier runs a query returning rows (pool or transaction).
type RowsQuerier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// DBTX is what the write paths run their statements on: a pgx.Tx, or the
// connection of a pipelined transaction (internal/memory/write's addtx.go)
// whose BEGIN and COMMIT travel with its statements.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}
