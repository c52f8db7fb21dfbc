package tenant

import (
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// The seed corpora are in testdata/fuzz/<FuzzName>/; plain go test runs
// them, make fuzz explores from them.

// FuzzConnectionURL: the data of a connection Secret either yields a URL
// that reads back (as net/url and as pgx read it) to exactly the host,
// port, database, user and password of the Secret, or an error that names
// the key and never holds the password. A "uri" key is used as it is.
func FuzzConnectionURL(f *testing.F) {
	f.Fuzz(func(t *testing.T, uri, host, port, dbname, user, password, sslmode string) {
		data := map[string][]byte{}
		for k, v := range map[string]string{"uri": uri, "host": host, "port": port, "dbname": dbname,
			"user": user, "password": password, "sslmode": sslmode} {
			if v != "" {
				data[k] = []byte(v)
			}
		}
		out, err := ConnectionURL(data, "")
		trimmedPW := strings.TrimSpace(password)
		if err != nil {
			if len(trimmedPW) >= 4 && strings.Contains(err.Error(), trimmedPW) {
				t.Fatalf("error %q holds the password", err)
			}
			if !strings.Contains(err.Error(), `"`) {
				t.Fatalf("error %q names no key", err)
			}
			return
		}
		if strings.TrimSpace(uri) != "" {
			if u, _ := url.Parse(strings.TrimSpace(uri)); u != nil && u.Path == "/*" {
				// CloudNativePG's "any database": the default one.
				if back, err := url.Parse(out); err != nil || back.Path != "/postgres" || back.Host != u.Host {
					t.Fatalf("uri %q came out as %q", uri, out)
				}
				return
			}
			if out != strings.TrimSpace(uri) {
				t.Fatalf("uri %q came out as %q", uri, out)
			}
			return
		}
		u, err := url.Parse(out)
		if err != nil {
			t.Fatalf("built %q, which does not parse: %v", out, err)
		}
		pw, _ := u.User.Password()
		wantPort := cmpOr(strings.TrimSpace(port), "5432")
		if n, err := strconv.Atoi(wantPort); err == nil {
			wantPort = strconv.Itoa(n) // "05432" is written 5432
		}
		wantDB := cmpOr(strings.TrimSpace(dbname), "postgres")
		if wantDB == "*" {
			wantDB = "postgres" // CloudNativePG's "any database"
		}
		if u.Scheme != "postgres" || u.User.Username() != strings.TrimSpace(user) || pw != trimmedPW ||
			u.Hostname() != strings.TrimSpace(host) || u.Port() != wantPort || u.Path != "/"+wantDB ||
			u.Query().Get("sslmode") != strings.TrimSpace(sslmode) {
			t.Fatalf("built %q from host=%q port=%q dbname=%q user=%q sslmode=%q: reads back as %+v", out, host, port, dbname, user, sslmode, u)
		}
		if !slices.Contains([]string{"", "disable", "allow", "prefer", "require", "verify-ca", "verify-full"}, u.Query().Get("sslmode")) {
			return // pgx refuses it with its own message, naming sslmode
		}
		cfg, err := pgconn.ParseConfig(out)
		if err != nil {
			if len(trimmedPW) >= 4 && strings.Contains(err.Error(), trimmedPW) {
				t.Fatalf("pgx error %q holds the password", err)
			}
			t.Fatalf("built %q, which pgx refuses: %v", out, err)
		}
		if cfg.Host != u.Hostname() || strconv.Itoa(int(cfg.Port)) != wantPort || cfg.Database != wantDB ||
			cfg.User != u.User.Username() || (trimmedPW != "" && cfg.Password != trimmedPW) {
			t.Fatalf("pgx reads %q as host=%q port=%d db=%q user=%q", out, cfg.Host, cfg.Port, cfg.Database, cfg.User)
		}
	})
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// FuzzLoginURL: the tenant's URL is built from an admin URL without ever
// carrying the admin's password or any parameter outside the allow-list:
// it holds exactly the tenant's user and password, the admin's scheme,
// host, database and allowed parameters, and nothing else.
func FuzzLoginURL(f *testing.F) {
	f.Fuzz(func(t *testing.T, adminURL, user, password string) {
		out, err := LoginURL(adminURL, user, password)
		admin, perr := url.Parse(adminURL)
		if err != nil {
			if perr == nil && (admin.Scheme == "postgres" || admin.Scheme == "postgresql") && admin.Host != "" {
				t.Fatalf("LoginURL refused %q, a postgres:// URL: %v", adminURL, err)
			}
			if len(adminURL) >= 4 && strings.Contains(err.Error(), adminURL) {
				t.Fatalf("error %q quotes the admin URL", err)
			}
			return
		}
		u, err := url.Parse(out)
		if err != nil {
			t.Fatalf("LoginURL(%q) = %q, which does not parse: %v", adminURL, out, err)
		}
		pw, _ := u.User.Password()
		if u.User.Username() != user || pw != password {
			t.Fatalf("LoginURL(%q) = %q: user %q password %q, want %q %q", adminURL, out, u.User.Username(), pw, user, password)
		}
		if u.Scheme != admin.Scheme || u.Host != admin.Host || u.Path != admin.Path || u.Fragment != "" || u.Opaque != "" {
			t.Fatalf("LoginURL(%q) = %q: scheme, host or path changed, or more was copied", adminURL, out)
		}
		// The query is the admin's, cut to the allow-list: password,
		// sslpassword, options, service... never reach a tenant.
		want := url.Values{}
		for k, v := range admin.Query() {
			if tenantURLParams[k] {
				want[k] = v
			}
		}
		if got := u.Query(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("LoginURL(%q) = %q: query %v, want %v", adminURL, out, got, want)
		}
		// Everything else is compared above; the user info is the tenant's
		// alone, so the admin's password is not in it unless the tenant's
		// own user or password happens to contain it.
		if apw, ok := admin.User.Password(); ok && len(apw) >= 4 && !strings.Contains(user+"\x00"+password, apw) {
			if info := u.User.String(); strings.Contains(info, apw) || strings.Contains(info, url.QueryEscape(apw)) {
				t.Fatalf("LoginURL(%q) = %q: the admin password is in the user info", adminURL, out)
			}
		}
	})
}
