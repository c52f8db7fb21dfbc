package tenant

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrMultiHost: a tenant's connection Secret names more than one server.
var ErrMultiHost = errors.New("the connection names more than one server")

// RefusedKeyError: a tenant's connection URL sets a parameter the operator
// does not take from a tenant (issue 26's sixth review, HIGH 1).
type RefusedKeyError struct {
	Key string
	Why string
}

func (e *RefusedKeyError) Error() string {
	return fmt.Sprintf("the connection URL may not set %q (%s); a connection Secret in a runtime's namespace may set only %s",
		e.Key, e.Why, strings.Join(tenantURLQueryKeys, ", "))
}

// tenantURLQueryKeys are the query parameters a tenant's URL may carry.
// sslrootcert only as "system" (the operator's own trust store).
var tenantURLQueryKeys = []string{
	"dbname", "user", "password", "sslmode", "sslrootcert=system", "sslsni", "connect_timeout", "application_name",
}

// tenantURLAllowedKeys is the allow-list pgconn applies itself (fail
// closed: a key it learns to parse later is refused too). host and port
// are there for the URL's authority; the query's are refused before.
var tenantURLAllowedKeys = []string{
	"host", "port", "database", "user", "password", "sslmode", "sslsni", "connect_timeout", "application_name",
}

// refusedWhy says why a query key is refused, for the ones a tenant may
// try on purpose; any other key gets the generic reason.
var refusedWhy = map[string]string{
	"sslrootcert":    "it names a file on the operator's filesystem; only sslrootcert=system is taken",
	"sslcert":        "it names a file on the operator's filesystem",
	"sslkey":         "it names a file on the operator's filesystem",
	"sslpassword":    "it unlocks a key file on the operator's filesystem",
	"passfile":       "it names a file on the operator's filesystem",
	"service":        "it reads a service file on the operator's filesystem",
	"servicefile":    "it names a file on the operator's filesystem",
	"options":        "it sets server options the operator chooses itself",
	"host":           "a host in the query overrides the URL's; name the server before the path",
	"port":           "a port in the query overrides the URL's; name it before the path",
	"hostaddr":       "it overrides the address the URL's host resolves to",
	"ssl":            "write sslmode instead",
	"pool_max_conns": "the operator sizes its own pools",
}

// CheckTenantURL checks a connection URL from a Secret of a runtime's
// namespace (connectionSecretRef), which the tenant writes: it must be a
// postgres:// URL, set only the parameters of tenantURLQueryKeys, and name
// exactly one server. It reads no file and resolves no name.
//
// Parameters: libpq's sslrootcert, sslcert, sslkey, passfile and
// servicefile make pgconn read files of the operator's filesystem
// (sslrootcert=/dev/zero grows the operator's memory until it is killed,
// at every reconcile; other paths are an oracle on its files), so they are
// refused before pgconn sees them, and pgconn parses with an allow-list of
// its own. A host or port in the query overrides the URL's for pgconn but
// not for the login URL the memory service gets (LoginURL copies the URL's
// host): refused too.
//
// One server: pgx connects to the next host whenever the first refuses
// with almost any error, "too many connections for role" included, which
// a tenant causes at will: a Secret naming the shared server first and
// its own server next is provisioned on its own server but known to the
// operator by the first host's address, and the operator's events about
// roles on the tenant's server (where it may forge any marker) landed on
// another tenant's runtime (issue 26's fifth review, MEDIUM 3b). A Secret
// the platform team writes may name a standby list and any parameter.
// ErrUnixSocket: a tenant's URL names no host, or a socket directory,
// which would reach the operator's own filesystem.
var ErrUnixSocket = errors.New("the connection names a Unix socket (no host, or a path as host): a connection Secret in a runtime's namespace must name a host reached over TCP")

// ErrNoUser: a tenant's URL names no user, so pgx would log in as the
// operator's own OS user.
var ErrNoUser = errors.New("the connection names no user (postgres://USER:PASSWORD@host/db, or user= in the query): without one the operator would log in as its own OS user")

func CheckTenantURL(raw string) error {
	// Before parsing: pgx keeps a copy of the parsed config per pool and
	// per connection, so a Secret's 1 MiB made each of them that large
	// (issue 26's twelfth review, HIGH 3).
	if len(raw) > MaxTenantURLBytes {
		return fmt.Errorf("%w: it has %d bytes, the most is %d", ErrURLTooLong, len(raw), MaxTenantURLBytes)
	}
	cfg, err := ParseTenantURL(raw)
	if err != nil {
		return err
	}
	// An empty host (postgres://u:p@/db) or a path as host means a Unix
	// socket on the operator's own filesystem: its errors told the tenant
	// which directories the operator's pod has (issue 26's seventh
	// review, L3).
	if u, perr := url.Parse(raw); perr == nil && u.Host == "" || strings.HasPrefix(cfg.Host, "/") {
		return ErrUnixSocket
	}
	for _, fb := range cfg.Fallbacks {
		if strings.HasPrefix(fb.Host, "/") {
			return ErrUnixSocket
		}
		if fb.Host != cfg.Host || fb.Port != cfg.Port {
			return fmt.Errorf("%w: it lists %s:%d and %s:%d; a connection Secret in a runtime's namespace must name exactly one host and port",
				ErrMultiHost, cfg.Host, cfg.Port, fb.Host, fb.Port)
		}
	}
	if err := checkOneHostEntry(raw, cfg); err != nil {
		return err
	}
	// Without a user pgx takes the operator's OS user (PGUSER, or a
	// lookup pgx itself warns may be slow or fail in a container): a
	// login the tenant did not choose, which tells its server who runs
	// the operator (issue 26's eighth review, residual of L3).
	if !namesUser(raw) {
		return ErrNoUser
	}
	return checkNameLengths(cfg)
}

// MaxTenantURLBytes bounds a tenant's connection URL: a user and a
// database of 63 bytes, a host of 253, a long password and every allowed
// parameter fit many times over.
const MaxTenantURLBytes = 4096

// ErrURLTooLong: a tenant's connection URL is longer than MaxTenantURLBytes.
var ErrURLTooLong = errors.New("the connection URL is too long")

// checkOneHostEntry refuses a host list, even one naming the same host
// again and again: pgconn makes one fallback config (two with
// sslmode=prefer or allow, each with its own TLS config) per entry, and
// pgx copies all of them into every pool and connection, so 100,000
// entries of one host kept about 36 MiB per connection, and a DNS name
// listed so was resolved once per entry at every connect (issue 26's
// twelfth review, HIGH 3). One host gives at most one fallback (the same
// host without TLS).
func checkOneHostEntry(raw string, cfg *pgconn.Config) error {
	u, err := url.Parse(raw)
	if err == nil && strings.Contains(u.Host, ",") || len(cfg.Fallbacks) > 1 {
		return fmt.Errorf("%w: it lists more than one host entry; a connection Secret in a runtime's namespace must name exactly one host and port, once", ErrMultiHost)
	}
	return nil
}

// maxHostBytes is the longest DNS name.
const maxHostBytes = 253

// ErrNameTooLong: a tenant's URL names a user, database or host longer than
// a server keeps.
var ErrNameTooLong = errors.New("the connection names a user or database longer than PostgreSQL keeps")

// checkNameLengths refuses a user or database name over
// MaxIdentifierBytes and a host over maxHostBytes. The operator keys what
// it keeps per server, and logs, by user@host:port/database: unbounded, a
// tenant's URL made every such key (and each copy of it) as long as the
// Secret (issue 26's eleventh review, L2).
func checkNameLengths(cfg *pgconn.Config) error {
	for _, name := range []struct {
		what, value string
		most        int
	}{
		{"user", cfg.User, MaxIdentifierBytes},
		{"database", cfg.Database, MaxIdentifierBytes},
		{"host", cfg.Host, maxHostBytes},
	} {
		if len(name.value) > name.most {
			return fmt.Errorf("%w: its %s name has %d bytes, the most is %d", ErrNameTooLong, name.what, len(name.value), name.most)
		}
	}
	return nil
}

// namesUser reports whether raw names a user: in its authority, or as
// user= in its query (read as checkTenantQuery reads it). The user of the
// authority is what comes before its last '@' and the first ':' there,
// as url.Parse (and so pgconn) takes it.
func namesUser(raw string) bool {
	_, rest, _ := strings.Cut(raw, "://")
	authority := rest[:strings.IndexAny(rest+"/", "/?")]
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		name, _, _ := strings.Cut(authority[:i], ":")
		if user, err := url.PathUnescape(name); err == nil && user != "" {
			return true
		}
	}
	_, query, _ := strings.Cut(raw, "?")
	for pair := range strings.SplitSeq(query, "&") {
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		key, _ := url.PathUnescape(strings.Trim(rawKey, " "))
		value, _ := url.PathUnescape(strings.Trim(rawValue, " "))
		if key == "user" && value != "" {
			return true
		}
	}
	return false
}

// ParseTenantURL parses a tenant's connection URL with the allow-list of
// CheckTenantURL, before any file is touched.
func ParseTenantURL(raw string) (*pgconn.Config, error) {
	systemRoots, err := checkTenantQuery(raw)
	if err != nil {
		return nil, err
	}
	allowed := tenantURLAllowedKeys
	if systemRoots {
		allowed = append(allowed[:len(allowed):len(allowed)], "sslrootcert")
	}
	cfg, err := pgconn.ParseConfigWithOptions(raw, pgconn.ParseConfigOptions{ConnStringAllowedKeys: allowed})
	if err != nil {
		// The parse error could quote the URL, password included.
		return nil, errors.New("not a valid PostgreSQL URL (or it sets a parameter a tenant's connection may not set)")
	}
	return cfg, nil
}

// checkTenantQuery refuses a query parameter a tenant may not set, naming
// it; it reports whether sslrootcert=system is set (every occurrence).
//
// It reads the query as pgconn does (libpq's rules): from the first '?',
// pairs split on '&' with exactly one '=', each half trimmed of raw spaces
// then percent-decoded, no '+' rule. A '?' or '@' inside the query is
// refused: there pgconn's and this reading could start the query at
// different places (pgconn takes the text up to an '@' before any '/' as
// the user name). pgconn's own allow-list then refuses whatever this
// reading might still miss, except sslrootcert, allowed only when every
// occurrence here is exactly "system".
func checkTenantQuery(raw string) (systemRoots bool, err error) {
	if !strings.HasPrefix(raw, "postgres://") && !strings.HasPrefix(raw, "postgresql://") {
		return false, errors.New("not a postgres:// URL")
	}
	_, query, ok := strings.Cut(raw, "?")
	if !ok || query == "" {
		return false, nil
	}
	if strings.ContainsAny(query, "?@") {
		return false, errors.New(`the URL's query holds a raw "?" or "@": percent-encode them`)
	}
	for pair := range strings.SplitSeq(query, "&") {
		rawKey, rawValue, found := strings.Cut(pair, "=")
		if !found || strings.Contains(rawValue, "=") {
			return false, errors.New("the URL's query is not key=value pairs joined by &")
		}
		key, kerr := url.PathUnescape(strings.Trim(rawKey, " "))
		value, verr := url.PathUnescape(strings.Trim(rawValue, " "))
		if kerr != nil || verr != nil {
			return false, errors.New("the URL's query has an invalid percent escape")
		}
		switch key {
		case "dbname", "database", "user", "password", "sslmode", "sslsni", "connect_timeout", "application_name":
			continue
		case "sslrootcert":
			if value == "system" {
				systemRoots = true
				continue
			}
		}
		why, known := refusedWhy[key]
		if !known {
			why = "not a parameter the operator takes from a tenant"
		}
		return false, &RefusedKeyError{Key: key, Why: why}
	}
	return systemRoots, nil
}
