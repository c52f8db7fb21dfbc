package tenant

import (
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCheckSingleServer (issue 26's fifth review, MEDIUM 3b): a URL naming
// more than one server, in its authority or in host=, is refused; one
// server is accepted, with sslmode=prefer too (pgx's fallback without TLS
// is the same server).
func TestCheckSingleServer(t *testing.T) {
	for _, c := range []struct {
		url     string
		refused bool
	}{
		{"postgres://u:p@db:5432/engram", false},
		{"postgres://u:p@db:5432/engram?sslmode=prefer", false},
		{"postgres://u:p@db:5432/engram?sslmode=disable", false},
		{"postgres://u:p@shared:5432,own:5432/engram?sslmode=disable", true},
		{"postgres://u:p@db:5432,db:5433/engram", true},
		{"postgres://u:p@db:5432/engram?host=shared,own", true},
	} {
		checkSingleServerRow(t, c.url, c.refused)
	}
}

// TestTenantURLRefusesRepeatedHostsAndLength (issue 26's twelfth review,
// HIGH 3): the same host listed again and again passed, and pgx kept a
// fallback config per entry in every pool and connection; a URL as long
// as a Secret's 1 MiB is refused before parsing.
func TestTenantURLRefusesRepeatedHostsAndLength(t *testing.T) {
	many := func(entry string, n int) string {
		return "postgres://u:p@" + strings.TrimSuffix(strings.Repeat(entry+",", n), ",") + "/engram"
	}
	for _, c := range []struct {
		url     string
		refused bool
	}{
		{"postgres://u:p@db:5432/engram?sslmode=allow", false},
		{"postgres://u:p@[::1]:5432/engram?sslmode=prefer", false},
		{many("db:5432", 2), true},
		{many("db:5432", 2) + "?sslmode=require", true},
		{many("db", 2), true},
		{many("10.1.2.3:5432", 200), true},
		{"postgres://u:p@db:5432/engram?host=db,db", true},
	} {
		checkSingleServerRow(t, c.url, c.refused)
	}
	for _, raw := range []string{
		many("10.1.2.3:5432", 70000),
		"postgres://u:" + strings.Repeat("p", MaxTenantURLBytes) + "@db:5432/engram",
	} {
		if err := CheckTenantURL(raw); !errors.Is(err, ErrURLTooLong) || len(err.Error()) > 200 {
			t.Errorf("CheckTenantURL(%d bytes) = %.200v, want ErrURLTooLong with a short message", len(raw), err)
		}
	}
	if err := CheckTenantURL("postgres://u:" + strings.Repeat("p", 1000) + "@db:5432/engram"); err != nil {
		t.Errorf("a 1,000-byte password: %v, want accepted", err)
	}
}

// checkSingleServerRow checks that raw is refused as naming more than one
// server (or by its query) when refused, and accepted otherwise.
func checkSingleServerRow(t *testing.T, raw string, refused bool) {
	t.Helper()
	err := CheckTenantURL(raw)
	var rk *RefusedKeyError
	if got := errors.Is(err, ErrMultiHost) || errors.As(err, &rk); got != refused {
		t.Errorf("CheckTenantURL(%.80q) = %.200v; want refused %v", raw, err, refused)
	}
	if !refused && err != nil {
		t.Errorf("CheckTenantURL(%.80q) = %v; want accepted", raw, err)
	}
}

// checkWithin runs CheckTenantURL(url) and returns its error, failing the
// test if it takes more than a few seconds (a parse that opens a FIFO
// nobody writes never returns) or if the heap grows past 256 MiB while it
// runs (a parse that reads /dev/zero never stops growing: panic, so that
// the process stops before the machine does).
func checkWithin(t *testing.T, url string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- CheckTenantURL(url) }()
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-deadline:
			t.Fatalf("CheckTenantURL(%q) did not return within 5 s: it reads a file the URL names", url)
		case <-tick.C:
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > 256<<20 {
				panic("CheckTenantURL(" + url + ") holds more than 256 MiB: it reads a file the URL names")
			}
		}
	}
}

// TestTenantURLTouchesNoOperatorFile (issue 26's sixth review, HIGH 1): a
// tenant's connection URL naming a file of the operator's filesystem
// (sslrootcert=/dev/zero grew the operator's heap past its 512Mi limit in
// under a second; a FIFO nobody writes blocked the parse for ever; other
// paths were an oracle on the operator's files) is refused at once, naming
// the key, whatever the file; so are the other parameters outside the
// allow-list, and a host or port in the query.
func TestTenantURLTouchesNoOperatorFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "never-written")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	const base = "postgres://u:p@127.0.0.1:5432/engram?sslmode=verify-ca&"
	for _, c := range []struct{ query, key string }{
		{"sslrootcert=" + fifo, "sslrootcert"},
		{"sslrootcert=/dev/zero", "sslrootcert"},
		{"sslrootcert=/etc/ssl/certs/ca-certificates.crt", "sslrootcert"},
		{"sslrootcert=system&sslrootcert=/dev/zero", "sslrootcert"},
		{"sslrootcert=%20system", "sslrootcert"},
		{"%73slrootcert=/dev/zero", "sslrootcert"},
		{"sslcert=" + fifo, "sslcert"},
		{"sslkey=/dev/zero", "sslkey"},
		{"sslpassword=x", "sslpassword"},
		{"passfile=" + fifo, "passfile"},
		{"service=x&servicefile=" + fifo, "service"},
		{"servicefile=" + fifo, "servicefile"},
		{"options=-c%20statement_timeout%3D0", "options"},
		{"host=10.0.0.2", "host"},
		{"port=5433", "port"},
		{"hostaddr=10.0.0.2", "hostaddr"},
		{"pool_max_conns=1000", "pool_max_conns"},
	} {
		err := checkWithin(t, base+c.query)
		var rk *RefusedKeyError
		if !errors.As(err, &rk) || rk.Key != c.key {
			t.Errorf("?%s: CheckTenantURL = %v; want the key %q refused", c.query, err, c.key)
		}
	}
	// A raw '?' or '@' in the query could move where pgconn reads it from.
	for _, u := range []string{
		"postgres://h?x=y@127.0.0.1/engram?sslrootcert=/dev/zero",
		"postgres://127.0.0.1/engram?sslmode=disable?sslrootcert=/dev/zero",
		"host=127.0.0.1 sslrootcert=/dev/zero",
	} {
		if err := checkWithin(t, u); err == nil {
			t.Errorf("CheckTenantURL(%q) accepted it", u)
		}
	}
	for _, q := range []string{
		"sslrootcert=system",
		"sslsni=1&connect_timeout=5&application_name=team-a&dbname=other&user=v&password=w",
	} {
		if err := checkWithin(t, base+q); err != nil {
			t.Errorf("?%s: CheckTenantURL = %v; want accepted", q, err)
		}
	}
}

// TestTenantURLReachesNoOperatorSocket (issue 26's seventh review, L3): a
// URL without a host, or with a path as host, connected to a Unix socket
// on the operator's filesystem, and the error told which directories its
// pod has. Refused now, before any dial.
func TestTenantURLReachesNoOperatorSocket(t *testing.T) {
	for _, raw := range []string{
		"postgres://u:p@/engram",
		"postgres://u:p@%2Ftmp/engram",
		"postgres://u:p@%2Fvar%2Frun%2Fpostgresql:5432/engram",
		"postgres://u:p@127.0.0.1,%2Ftmp/engram",
	} {
		if err := CheckTenantURL(raw); !errors.Is(err, ErrUnixSocket) {
			t.Errorf("CheckTenantURL(%q) = %v, want ErrUnixSocket", raw, err)
		}
	}
	if err := CheckTenantURL("postgres://u:p@db.example:5432/engram?sslmode=require"); err != nil {
		t.Errorf("a TCP host is refused: %v", err)
	}
}

// TestTenantURLWithoutUserIsRefused (issue 26's eighth review, residual of
// the seventh's L3): a URL naming no user was accepted, and pgx logged in
// as the operator's own OS user. Refused now, with ErrNoUser; a user in
// the authority or in the query is taken.
func TestTenantURLWithoutUserIsRefused(t *testing.T) {
	for _, raw := range []string{
		"postgres://127.0.0.1/engram",
		"postgres://db.example:5432/engram?sslmode=require",
		"postgres://:secret@db.example/engram",
		"postgres://db.example/engram?user=",
		"postgresql://db.example/engram?password=p",
	} {
		if err := CheckTenantURL(raw); !errors.Is(err, ErrNoUser) {
			t.Errorf("CheckTenantURL(%q) = %v, want ErrNoUser", raw, err)
		}
	}
	for _, raw := range []string{
		"postgres://u:p@db.example:5432/engram",
		"postgres://u@db.example/engram",
		"postgres://db.example/engram?user=u&password=p",
		"postgres://db.example/engram?user=%75",
	} {
		if err := CheckTenantURL(raw); err != nil {
			t.Errorf("CheckTenantURL(%q) = %v, want accepted", raw, err)
		}
	}
}

// TestTenantURLRefusesLongNames (issue 26, eleventh review, L2 with HIGH 1):
// a user or database name as long as the Secret made every key the
// operator keeps per server (and each log line) that long; PostgreSQL
// keeps 63 bytes of either anyway. Refused now, tenant URLs only.
func TestTenantURLRefusesLongNames(t *testing.T) {
	long, name63 := strings.Repeat("u", 64), strings.Repeat("n", 63)
	for _, c := range []struct {
		raw     string
		refused bool
	}{
		{"postgres://" + name63 + ":p@db.example:5432/" + name63, false},
		{"postgres://" + long + ":p@db.example:5432/engram", true},
		{"postgres://u:p@db.example:5432/" + long, true},
		{"postgres://u:p@db.example:5432/engram?user=" + long, true},
		{"postgres://u:p@db.example:5432/engram?dbname=" + long, true},
		{"postgres://u:p@" + strings.Repeat("h", 254) + ":5432/engram", true},
		{"postgres://" + strings.Repeat("u", 1900) + ":p@db.example:5432/" + strings.Repeat("d", 1900), true},
	} {
		err := CheckTenantURL(c.raw)
		if got := errors.Is(err, ErrNameTooLong); got != c.refused {
			t.Errorf("CheckTenantURL(%.60q…) = %v, want refused %v", c.raw, err, c.refused)
		}
	}
}
