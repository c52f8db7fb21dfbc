package tenant

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ConnectionURL builds a postgres:// URL from the data of a connection
// Secret in the format of CloudNativePG's and Crunchy PGO's user Secrets:
// the key uriKey (default "uri") holding a URI, or else the keys host, port
// (default 5432), dbname, user and password. It has no Kubernetes types: the
// caller passes Secret.Data.
func ConnectionURL(data map[string][]byte, uriKey string) (string, error) {
	if uriKey == "" {
		uriKey = "uri"
	}
	if raw := strings.TrimSpace(string(data[uriKey])); raw != "" {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
			return "", fmt.Errorf("key %q is not a postgres:// URI", uriKey)
		}
		return raw, nil
	}
	get := func(k string) string { return strings.TrimSpace(string(data[k])) }
	host, user := get("host"), get("user")
	if host == "" || user == "" {
		return "", fmt.Errorf("connection secret has neither %q nor host and user", uriKey)
	}
	port := get("port")
	if port == "" {
		port = "5432"
	}
	db := get("dbname")
	if db == "" {
		db = "postgres"
	}
	u := url.URL{
		Scheme: "postgres",
		User:   url.UserPassword(user, get("password")),
		Host:   net.JoinHostPort(host, port),
		Path:   "/" + db,
	}
	if mode := get("sslmode"); mode != "" {
		u.RawQuery = url.Values{"sslmode": {mode}}.Encode()
	}
	return u.String(), nil
}

// LoginURL returns adminURL with the credentials replaced by the tenant's
// login role: same host, port, database and options.
func LoginURL(adminURL, user, password string) (string, error) {
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", fmt.Errorf("parsing admin URL: %w", err)
	}
	u.User = url.UserPassword(user, password)
	return u.String(), nil
}
