package tenant

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// DefaultDatabase is the database a connection goes to when its Secret
// names none, or names "*" (any database: CloudNativePG's superuser Secret).
const DefaultDatabase = "postgres"

// ConnectionURL builds a postgres:// URL from the data of a connection
// Secret in the format of CloudNativePG's and Crunchy PGO's user Secrets:
// the key uriKey (default "uri") holding a URI, or else the keys host, port
// (default 5432), dbname, user (or username) and password. The database "*"
// of CloudNativePG's <cluster>-superuser Secret (any database) becomes
// DefaultDatabase. It has no Kubernetes types: the caller passes
// Secret.Data.
func ConnectionURL(data map[string][]byte, uriKey string) (string, error) {
	if uriKey == "" {
		uriKey = "uri"
	}
	if raw := strings.TrimSpace(string(data[uriKey])); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
			return "", fmt.Errorf("key %q is not a postgres:// URI", uriKey)
		}
		if u.Path == "/*" {
			u.Path, u.RawPath = "/"+DefaultDatabase, ""
			return u.String(), nil
		}
		return raw, nil
	}
	get := func(k string) string { return strings.TrimSpace(string(data[k])) }
	host, user := get("host"), cmp.Or(get("user"), get("username"))
	if host == "" || user == "" {
		return "", fmt.Errorf("connection secret has neither %q nor host and user", uriKey)
	}
	// A host or port a URL cannot carry would not fail here but later, as
	// another URL or none ("db/x" becomes "db%2Fx", which no parser
	// reads): check them, naming the key, never quoting the Secret.
	if !validHost(host) {
		return "", errors.New(`key "host" must be a host name or an IP address`)
	}
	port := get("port")
	if port == "" {
		port = "5432"
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return "", errors.New(`key "port" must be a port number (1-65535)`)
	}
	db := get("dbname")
	if db == "" || db == "*" {
		db = DefaultDatabase
	}
	// PostgreSQL strings cannot hold NUL; pgx refuses %00 in a URL.
	for _, k := range []string{"user", "username", "password", "dbname"} {
		if strings.ContainsRune(get(k), 0) {
			return "", fmt.Errorf("key %q must not contain a NUL character", k)
		}
	}
	u := url.URL{
		Scheme: "postgres",
		User:   url.UserPassword(user, get("password")),
		Host:   net.JoinHostPort(host, strconv.Itoa(p)),
		Path:   "/" + db,
	}
	if mode := get("sslmode"); mode != "" {
		u.RawQuery = url.Values{"sslmode": {mode}}.Encode()
	}
	return u.String(), nil
}

// WithDatabase returns the admin URL rawURL pointing at database name
// (a MemoryDatabase's spec.databaseName), everything else kept.
func WithDatabase(rawURL, name string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse quotes its input, which holds the admin password.
		return "", errors.New("the admin connection is not a valid URL")
	}
	if strings.ContainsAny(name, "/?#*") || strings.ContainsRune(name, 0) || name == "" {
		return "", fmt.Errorf("%q is not a database name", name)
	}
	u.Path, u.RawPath = "/"+name, ""
	return u.String(), nil
}

// hostName is a DNS name (or a Kubernetes Service name).
var hostName = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9._-]{0,252})$`)

// validHost reports whether host is a DNS name or an IP address.
func validHost(host string) bool {
	return hostName.MatchString(host) || net.ParseIP(host) != nil
}

// tenantURLParams are the only query parameters of the admin URL a tenant's
// URL keeps: where and how securely to connect. Everything else is left
// out, in particular credentials and anything that could carry them or
// change who connects: user, password, passfile, service, servicefile,
// options (could SET ROLE), sslcert/sslkey/sslpassword (the admin's client
// certificate), host/hostaddr/port/dbname overrides.
var tenantURLParams = map[string]bool{
	"sslmode":              true,
	"sslrootcert":          true,
	"sslcrl":               true,
	"sslsni":               true,
	"sslnegotiation":       true,
	"channel_binding":      true,
	"connect_timeout":      true,
	"target_session_attrs": true,
	"load_balance_hosts":   true,
	"keepalives":           true,
	"keepalives_idle":      true,
	"keepalives_interval":  true,
	"keepalives_count":     true,
	"tcp_user_timeout":     true,
}

// LoginURL builds the tenant login role's URL from the parts of adminURL:
// scheme, host(s), port and database, the tenant's user and password, and
// only the query parameters in tenantURLParams. Nothing of the admin's
// identity is copied.
func LoginURL(adminURL, user, password string) (string, error) {
	u, err := url.Parse(adminURL)
	if err != nil {
		// url.Parse quotes its input, which holds the admin password.
		return "", fmt.Errorf("the admin connection is not a valid URL")
	}
	// As ConnectionURL requires: anything else (a relative reference, an
	// opaque "postgres:host") would turn into a different URL below.
	if (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return "", fmt.Errorf("the admin connection is not a postgres:// URL with a host")
	}
	q := url.Values{}
	for k, v := range u.Query() {
		if tenantURLParams[k] {
			q[k] = v
		}
	}
	out := url.URL{
		Scheme:   u.Scheme,
		User:     url.UserPassword(user, password),
		Host:     u.Host,
		Path:     u.Path,
		RawQuery: q.Encode(),
	}
	return out.String(), nil
}

// AdminUser returns the user name of an admin URL, so messages shown to
// tenants can leave it out ("" when the URL has none).
func AdminUser(adminURL string) string {
	u, err := url.Parse(adminURL)
	if err != nil {
		return ""
	}
	if name := u.Query().Get("user"); name != "" {
		return name
	}
	return u.User.Username()
}
