package tenant

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// mustParseConfig parses url as a connection config or fails the test.
func mustParseConfig(t testing.TB, url string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// mustOpenWatchdog opens a lock watchdog on cfg with p, or fails the test;
// it is closed when the test ends.
func mustOpenWatchdog(t testing.TB, ctx context.Context, cfg *pgx.ConnConfig, p LockPolicy) *LockWatchdog {
	t.Helper()
	w, err := OpenLockWatchdog(ctx, cfg, p)
	if err != nil {
		t.Fatalf("opening the watchdog: %v", err)
	}
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}
