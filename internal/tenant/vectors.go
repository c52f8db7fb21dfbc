package tenant

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// vectorTables are the tables whose rows carry an embedding.
var vectorTables = []string{"memories", "messages", "summaries", "episodes"}

// HoldsVectors reports whether the tenant in schema stores any vector: a
// memory, or a message, summary or episode with an embedding. Each probe
// stops at the first row.
func HoldsVectors(ctx context.Context, admin *pgxpool.Pool, schema string) (bool, error) {
	for _, table := range vectorTables {
		var held bool
		q := fmt.Sprintf(`SELECT EXISTS (SELECT 1 FROM %s WHERE embedding IS NOT NULL)`, pgx.Identifier{schema, table}.Sanitize())
		if err := admin.QueryRow(ctx, q).Scan(&held); err != nil {
			return false, fmt.Errorf("looking for vectors in %s.%s: %w", schema, table, err)
		}
		if held {
			return true, nil
		}
	}
	return false, nil
}
