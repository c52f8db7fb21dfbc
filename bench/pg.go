package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/tenant"
)

// benchDB is a database of its own on the server of DATABASE_URL, so a
// benchmark never touches other data; drop removes it and the tenant roles
// the benchmark created (roles are cluster-wide and outlive the database).
type benchDB struct {
	serverURL string // DATABASE_URL
	name      string
	URL       string // admin URL of the new database
	roles     []string
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// createDatabase creates engram_bench_<purpose>_<random> with pgvector.
func createDatabase(ctx context.Context, serverURL, purpose string) (*benchDB, error) {
	name := "engram_bench_" + purpose + "_" + randomSuffix()
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return nil, fmt.Errorf("connecting to DATABASE_URL: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("creating database %s: %w", name, err)
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("parsing DATABASE_URL: %w", err)
	}
	u.Path = "/" + name
	db := &benchDB{serverURL: serverURL, name: name, URL: u.String()}
	c2, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		return db, fmt.Errorf("connecting to %s: %w", name, err)
	}
	defer c2.Close(ctx)
	if _, err := c2.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS vector"); err != nil {
		return db, fmt.Errorf("creating extension vector in %s: %w", name, err)
	}
	return db, nil
}

// tenantRoles remembers the roles of a tenant schema for drop.
func (d *benchDB) tenantRoles(schema string) {
	d.roles = append(d.roles, tenant.LoginRole(schema), tenant.OwnerRole(schema))
}

// drop removes the database, then the remembered roles. It uses a fresh
// context so it also runs after an interrupt.
func (d *benchDB) drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.serverURL)
	if err != nil {
		return fmt.Errorf("connecting to drop %s: %w", d.name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping database %s: %w", d.name, err)
	}
	for _, r := range d.roles {
		if _, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{r}.Sanitize()); err != nil {
			return fmt.Errorf("dropping role %s: %w", r, err)
		}
	}
	return nil
}

// provisionTenant creates a tenant schema with internal/tenant, as the
// operator does, and returns the login role's URL.
func provisionTenant(ctx context.Context, db *benchDB, schema string, dims int) (string, error) {
	admin, err := pgxpool.New(ctx, db.URL)
	if err != nil {
		return "", fmt.Errorf("opening admin pool: %w", err)
	}
	defer admin.Close()
	db.tenantRoles(schema)
	res, err := tenant.Provision(ctx, admin, tenant.Spec{Schema: schema, Dimensions: dims, Owner: tenant.Owner{UID: "bench-" + schema, Namespace: "bench-" + schema, Name: schema}})
	if err != nil {
		return "", err
	}
	return tenant.LoginURL(db.URL, res.LoginRole, res.Password)
}

// serverInfo is the PostgreSQL and pgvector version, for the report.
func serverInfo(ctx context.Context, serverURL string) (string, error) {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", fmt.Errorf("connecting to DATABASE_URL: %w", err)
	}
	defer conn.Close(ctx)
	var pg, vec string
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version'),
		coalesce((SELECT extversion FROM pg_extension WHERE extname = 'vector'), 'absent')`).Scan(&pg, &vec)
	if err != nil {
		return "", fmt.Errorf("reading server version: %w", err)
	}
	var sb, wm string
	_ = conn.QueryRow(ctx, `SELECT current_setting('shared_buffers'), current_setting('work_mem')`).Scan(&sb, &wm)
	return fmt.Sprintf("PostgreSQL %s, pgvector %s (shared_buffers %s, work_mem %s)", pg, vec, sb, wm), nil
}
