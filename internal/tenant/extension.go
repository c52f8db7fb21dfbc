package tenant

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ensureExtension makes sure pgvector >= MinVectorVersion is installed in the
// database and returns the schema it lives in.
func ensureExtension(ctx context.Context, conn *pgx.Conn, res *Result) (string, error) {
	version, schema, err := installedVector(ctx, conn)
	if err != nil {
		return "", err
	}
	if version == "" {
		var available bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')`).Scan(&available); err != nil {
			return "", fmt.Errorf("looking for extension vector: %w", err)
		}
		if !available {
			return "", fmt.Errorf("%w: the server has no extension \"vector\"; install pgvector >= %s on the PostgreSQL server (package postgresql-<major>-pgvector)", ErrExtensionMissing, MinVectorVersion)
		}
		if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS vector`); err != nil {
			return "", fmt.Errorf("%w: CREATE EXTENSION vector failed (%v); a superuser must run CREATE EXTENSION vector (pgvector >= %s) in this database once", ErrExtensionMissing, err, MinVectorVersion)
		}
		res.Changes = append(res.Changes, "created extension vector")
		if version, schema, err = installedVector(ctx, conn); err != nil {
			return "", err
		}
	}
	if versionLess(version, MinVectorVersion) {
		return "", fmt.Errorf("%w: pgvector %s is installed but Engram needs >= %s; run ALTER EXTENSION vector UPDATE", ErrExtensionMissing, version, MinVectorVersion)
	}
	return schema, nil
}

func installedVector(ctx context.Context, conn *pgx.Conn) (version, schema string, err error) {
	err = conn.QueryRow(ctx, `SELECT e.extversion, n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'`).Scan(&version, &schema)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("reading extension vector: %w", err)
	}
	return version, schema, nil
}

// versionLess compares dotted numeric versions ("0.7.0" < "0.8.0").
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) || i < len(pb); i++ {
		var x, y int
		if i < len(pa) {
			_, _ = fmt.Sscanf(pa[i], "%d", &x)
		}
		if i < len(pb) {
			_, _ = fmt.Sscanf(pb[i], "%d", &y)
		}
		if x != y {
			return x < y
		}
	}
	return false
}
