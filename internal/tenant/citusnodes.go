package tenant

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// MaxCitusWorkers is the most Citus workers of one coordinator the
// operator's node runners look at.
const MaxCitusWorkers = 64

// CitusWorkerConfigs returns, when q reaches the coordinator of a Citus
// cluster, one connection config per active worker (pg_dist_node): cfg
// with the worker's host and port, the same user, password and database.
// A tenant's login role can log in on a worker directly (Citus creates
// every role there), so what bounds a tenant's sessions on the coordinator
// (the transaction reaper, the lock watchdog) must look at each worker
// too, each worker keeping its own lock table and cleanup horizon. It
// returns nil for a plain database and for a worker.
//
// The operator reaches the workers with the admin credentials it has for
// the coordinator: a Citus cluster's nodes share their roles, and the
// admin's password (or certificate) must let it log in on each worker as
// it does on the coordinator (docs/security.md, "Citus workers"). Where
// pg_dist_authinfo gives the admin role a password for a worker (or for
// every node), which is how Citus itself reaches a worker, that password
// is used instead.
func CitusWorkerConfigs(ctx context.Context, q querier, cfg *pgx.ConnConfig) ([]*pgx.ConnConfig, error) {
	c, err := DetectCitus(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("listing the Citus workers: %w", err)
	}
	if !c.Coordinator {
		return nil, nil
	}
	if len(c.Workers) > MaxCitusWorkers {
		// Each worker costs the operator a goroutine and a connection per
		// runner: a list this long is refused, not followed in part.
		return nil, fmt.Errorf("listing the Citus workers: the coordinator lists %d active workers, more than the %d the operator follows", len(c.Workers), MaxCitusWorkers)
	}
	passwords := workerPasswords(ctx, q)
	out := make([]*pgx.ConnConfig, 0, len(c.Workers))
	for _, w := range c.Workers {
		host, port, err := net.SplitHostPort(w)
		if err != nil {
			return nil, fmt.Errorf("reading Citus worker %q: %w", w, err)
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("reading the port of Citus worker %q: %w", w, err)
		}
		wc := cfg.Copy()
		wc.Host, wc.Port, wc.Fallbacks = host, uint16(p), nil
		if pw, ok := passwords[w]; ok {
			wc.Password = pw
		}
		if wc.TLSConfig != nil {
			// Verify the worker's certificate against its own name.
			wc.TLSConfig = wc.TLSConfig.Clone()
			wc.TLSConfig.ServerName = host
		}
		out = append(out, wc)
	}
	return out, nil
}

// authinfoPassword finds the password in a pg_dist_authinfo entry (libpq
// key=value pairs, a value single-quoted when it holds spaces).
var authinfoPassword = regexp.MustCompile(`(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// workerPasswords reads, from pg_dist_authinfo, the admin role's password
// for each active worker (host:port): the entry of the worker's node id
// first, else the one for every node (node id 0). Only a superuser may
// read that table; for anyone else, and when it holds no password, the
// map is empty and the coordinator's password is used.
func workerPasswords(ctx context.Context, q querier) map[string]string {
	rows, err := q.Query(ctx, `SELECT n.nodename, n.nodeport, a.authinfo
		FROM pg_dist_node n
		JOIN LATERAL (SELECT authinfo FROM pg_dist_authinfo
			WHERE rolename = current_user AND nodeid IN (n.nodeid, 0) ORDER BY nodeid DESC LIMIT 1) a ON true
		WHERE n.isactive AND n.noderole = 'primary' AND n.shouldhaveshards AND n.groupid <> 0`)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	var host, info string
	var port int
	_, err = pgx.ForEachRow(rows, []any{&host, &port, &info}, func() error {
		if m := authinfoPassword.FindStringSubmatch(info); m != nil {
			out[net.JoinHostPort(host, strconv.Itoa(port))] = unquoteConninfo(m[1])
		}
		return nil
	})
	if err != nil {
		return nil
	}
	return out
}

// unquoteConninfo undoes libpq's quoting of a conninfo value.
func unquoteConninfo(v string) string {
	if len(v) < 2 || v[0] != '\'' || v[len(v)-1] != '\'' {
		return v
	}
	var b strings.Builder
	for i := 1; i < len(v)-1; i++ {
		if v[i] == '\\' && i+1 < len(v)-1 {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
