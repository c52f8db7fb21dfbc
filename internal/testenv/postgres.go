package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AdminURL returns DATABASE_URL, the admin connection of a PostgreSQL with
// pgvector, or fails/skips the test when it is not set.
func AdminURL(t testing.TB) string {
	t.Helper()
	return requiredEnv(t, "DATABASE_URL", "PostgreSQL", "run `hack/pgvector.sh start` and export DATABASE_URL=$(hack/pgvector.sh url)")
}

// NewDatabase creates a fresh database with the vector extension on the
// server of DATABASE_URL and returns an admin URL for it. The database is
// dropped when the test ends, so tests never see each other's data. Under
// OnCitus (ENGRAM_TEST_ON_CITUS=1) the database is made on the Citus
// cluster of CITUS_URL instead (NewCitusDatabase), so a whole suite runs
// through a coordinator.
func NewDatabase(t testing.TB) string {
	t.Helper()
	if OnCitus() {
		return NewCitusDatabase(t)
	}
	admin := AdminURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connecting to DATABASE_URL: %v", err)
	}
	defer conn.Close(ctx)

	name := "engram_test_" + randomHex(6)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	t.Cleanup(func() { dropDatabase(t, admin, name) })

	dbURL, err := withDatabase(admin, name)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("connecting to %s: %v", name, err)
	}
	defer c2.Close(ctx)
	if _, err := c2.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS vector"); err != nil {
		t.Fatalf("CREATE EXTENSION vector in %s: %v (the server needs pgvector >= 0.7)", name, err)
	}
	return dbURL
}

// NewPool opens a pgx pool on url with at most maxConns connections, closed
// when the test ends.
func NewPool(t testing.TB, rawURL string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		t.Fatalf("parsing database URL: %v", err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("opening pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func dropDatabase(t testing.TB, admin, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Logf("dropping database %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Logf("dropping database %s: %v", name, err)
	}
}

// withDatabase returns rawURL pointing at database name.
func withDatabase(rawURL, name string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// WithUser returns rawURL with other login credentials.
func WithUser(rawURL, user, password string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
