package tenant

import (
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
