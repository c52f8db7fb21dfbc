package testenv

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
)

// Exec runs one statement on a connection of its own to rawURL: for the
// statements that cannot run inside a transaction or a pool's session
// (CREATE DATABASE, CREATE EXTENSION citus) and for setting up a node
// before any pool exists. The bench's Citus databases use it too.
func Exec(ctx context.Context, rawURL, stmt string) error {
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, stmt)
	return err
}

// QueryRow runs one query on a connection of its own to rawURL and scans
// its row into dest; a query that returns no row gives pgx.ErrNoRows
// (errors.Is).
func QueryRow(ctx context.Context, rawURL, query string, args []any, dest ...any) error {
	conn, err := pgx.Connect(ctx, rawURL)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", HostPort(rawURL), err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, query, args...).Scan(dest...); err != nil {
		return fmt.Errorf("on %s: %w", HostPort(rawURL), err)
	}
	return nil
}

// HostPort returns the host:port of a URL (never its password), "?" when
// it does not parse: for error messages naming a node.
func HostPort(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "?"
	}
	return u.Host
}
