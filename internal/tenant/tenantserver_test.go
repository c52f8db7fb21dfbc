package tenant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// tenantConnKeeps bounds what the bounds of a connection to a tenant's
// server let it keep while idle beyond a fresh connection (pgx's own,
// about 28 KiB on a real server): one read buffer of at most
// MaxTenantServerMessage, TenantStatementCache statements with
// descriptions of at most tenantSmallMessage each (about twice their wire
// bytes in pgx). docs/security.md's table adds 64 ParameterStatus values
// of tenantParameterStatus (64 KiB) and pgx's 28 KiB: 512 KiB a
// connection.
const tenantConnKeeps = 384 << 10

// hostileTenantServer answers every statement with columns padded to just
// under tenantSmallMessage and, for "big", a row of rowBytes.
func hostileTenantServer(t *testing.T, rowBytes int) string {
	var cols []fakeCol
	for i := range 41 { // 41 × (80 + 19) bytes: just under tenantSmallMessage of row description
		cols = append(cols, fakeCol{fmt.Sprintf("c%02d%s", i, strings.Repeat("p", 77)), 25})
	}
	return fakePG(t, func(q string) fakeAnswer {
		if strings.Contains(q, "big") {
			return fakeAnswer{cols: cols[:1], rows: func(emit func(...string) bool) { emit(strings.Repeat("x", rowBytes)) }}
		}
		return fakeAnswer{cols: cols, rows: func(emit func(...string) bool) {
			vals := make([]string, len(cols))
			emit(vals...)
		}}
	})
}

// tenantServerConn connects to url as the operator does to a tenant's
// server (BoundTenantServer).
func tenantServerConn(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	cfg := mustParseConfig(t, url)
	BoundTenantServer(cfg)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// TestTenantServerConnectionKeepsLittle (issue 26, what stays per
// connection): a connection to a server a tenant names read messages of
// up to MaxServerMessage (8 MiB) and kept the read buffer of the largest
// while idle, and 512 statements with their descriptions; a tenant's
// pools and nodes summed to hundreds of MiB. Now a message over
// MaxTenantServerMessage ends the connection, and a connection driven to
// every bound (a row just under it, more distinct statements than the
// cache holds, each with a padded description) keeps under
// tenantConnKeeps.
func TestTenantServerConnectionKeepsLittle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	over := hostileTenantServer(t, MaxTenantServerMessage+1)
	var s string
	err := tenantServerConn(t, ctx, over).QueryRow(ctx, "SELECT big").Scan(&s)
	if err == nil || !strings.Contains(err.Error(), "body length") {
		t.Fatalf("a row over MaxTenantServerMessage from a tenant's server: %v; want the body-length error", err)
	}

	url := hostileTenantServer(t, MaxTenantServerMessage-1<<10)
	const conns = 8
	var open []*pgx.Conn
	for range conns {
		open = append(open, tenantServerConn(t, ctx, url))
	}
	base := retainedHeap() // fresh connections (and the fake server's buffers)
	for _, conn := range open {
		driveToBounds(t, ctx, conn) // distinct texts: the cache fills
	}
	var grew uint64
	if h := retainedHeap(); h > base {
		grew = h - base
	}
	per := grew / conns
	t.Logf("%d idle connections to a tenant's server driven to every bound: retained heap grew %d KiB (%d KiB each)", conns, grew>>10, per>>10)
	if per > tenantConnKeeps {
		t.Errorf("an idle connection to a tenant's server keeps %d KiB, want at most %d KiB", per>>10, tenantConnKeeps>>10)
	}
}

// TestTenantServerAnswerIsSmaller (issue 26, the worst case under the
// operator's memory limit): an answer from a tenant's server was read up
// to MaxServerAnswer (32 MiB) on each of the up to 40 connections that
// read at once. It now ends at MaxTenantServerAnswer; a platform
// connection still reads it.
func TestTenantServerAnswerIsSmaller(t *testing.T) {
	row := strings.Repeat("r", 1<<10)
	url := fakePG(t, func(q string) fakeAnswer {
		return fakeAnswer{cols: []fakeCol{{"r", 25}}, rows: func(emit func(...string) bool) {
			for range MaxTenantServerAnswer>>10 + 1024 { // 1 MiB over
				if !emit(row) {
					return
				}
			}
		}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	count := func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, "SELECT many")
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		return rows.Err()
	}
	if err := count(tenantServerConn(t, ctx, url)); !errors.Is(err, ErrServerAnswerTooLarge) {
		t.Fatalf("an answer of %d MiB from a tenant's server: %v; want ErrServerAnswerTooLarge", MaxTenantServerAnswer>>20+1, err)
	}
	if err := count(fakeConn(t, url)); err != nil {
		t.Fatalf("the same answer on a platform connection: %v", err)
	}
}

// TestBoundTwiceKeepsOneWrapper: a config copied from a tenant's pool
// (BoundTenantServer) and bounded again with BoundMessages wrapped the
// connection twice, and withRefusal read the outer (platform) wrapper,
// which had refused nothing: the reason was lost. One wrapper, with the
// tenant's bounds, now reads the answer and names the refusal.
func TestBoundTwiceKeepsOneWrapper(t *testing.T) {
	row := strings.Repeat("r", 1<<10)
	url := fakePG(t, func(q string) fakeAnswer {
		return fakeAnswer{cols: []fakeCol{{"r", 25}}, rows: func(emit func(...string) bool) {
			for range MaxTenantServerAnswer>>10 + 1024 {
				if !emit(row) {
					return
				}
			}
		}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, order := range []string{"tenant then platform", "platform then tenant"} {
		cfg := mustParseConfig(t, url)
		if order == "tenant then platform" {
			BoundTenantServer(cfg)
			BoundMessages(&cfg.Config)
		} else {
			BoundMessages(&cfg.Config)
			BoundTenantServer(cfg)
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, ok := conn.PgConn().Conn().(*answerBound)
		if !ok || b.lim != tenantLimits {
			t.Fatalf("%s: the connection is %T, want one wrapper with the tenant's bounds", order, conn.PgConn().Conn())
		}
		if _, twice := b.Conn.(*answerBound); twice {
			t.Fatalf("%s: the connection is bounded twice", order)
		}
		rows, err := conn.Query(ctx, "SELECT many")
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
		}
		if !errors.Is(err, ErrServerAnswerTooLarge) {
			t.Fatalf("%s: %v; want ErrServerAnswerTooLarge", order, err)
		}
		if why := withRefusal(conn, errors.New("conn closed")); !errors.Is(why, ErrServerAnswerTooLarge) {
			t.Errorf("%s: withRefusal says %v; want the refusal's reason", order, why)
		}
		_ = conn.Close(context.Background())
	}
}
