package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// citusTemplateVersion changes whenever what a template holds changes
// (setUpCitusDatabase), so an old template of a cached cluster is not used.
const citusTemplateVersion = "v1"

// citusTemplateReady is the comment a finished template carries on the
// coordinator: a template left half made by a killed test process lacks it
// and is made again.
const citusTemplateReady = "engram test template " + citusTemplateVersion + ": ready"

// Making a Citus database a cluster of its own (setUpCitusDatabase) costs
// about 5 s of the three nodes (CREATE EXTENSION citus alone is 1-2 s a
// node), once per test: most of the Citus pass of `make test`. So it is
// done once, into a template database on every node, sealed (no
// connections, IS_TEMPLATE) and copied with CREATE DATABASE ... TEMPLATE,
// about 0.4 s a node. The copies are whole Citus clusters: the metadata of
// every node (pg_dist_node, the workers' groups) is copied node by node
// from one consistent state; distribution, grants propagated to the
// workers and citus_schema_move work in them as in a database set up by
// hand (checked by TestCitusTemplateCopiesAreClusters).

// citusTemplateName names the template of one cluster: another coordinator
// address or worker set (a cluster started again on other ports) gets a
// template of its own, since the template's pg_dist_node names the nodes,
// and so does another PostgreSQL, Citus or pgvector (software: the copies
// would carry the old extension versions).
func citusTemplateName(coordHost string, coordPort int, workers []string, software string) string {
	sum := sha256.Sum256([]byte(citusTemplateVersion + "|" + net.JoinHostPort(coordHost, fmt.Sprint(coordPort)) + "|" + strings.Join(workers, ",") + "|" + software))
	return "engram_citus_template_" + hex.EncodeToString(sum[:5])
}

// ensureCitusTemplate makes the template on every node unless a ready one
// is there. The caller holds the setup lock.
func ensureCitusTemplate(ctx context.Context, admin string, nodeURLs []string, coordHost string, coordPort int, workers []string) (string, error) {
	software, err := citusSoftware(ctx, admin)
	if err != nil {
		return "", err
	}
	name := citusTemplateName(coordHost, coordPort, workers, software)
	servers := make([]string, len(nodeURLs))
	for i, u := range nodeURLs {
		servers[i] = postgresDB(u)
	}
	nodeURLs = servers
	ready, err := citusTemplateIsReady(ctx, nodeURLs, name)
	if err != nil || ready {
		return name, err
	}
	for _, u := range nodeURLs {
		if err := dropTemplate(ctx, u, name); err != nil {
			return "", err
		}
		if err := createOn(ctx, u, name); err != nil {
			return "", err
		}
	}
	dbURL, err := withDatabase(admin, name)
	if err != nil {
		return "", err
	}
	if err := setUpCitusDatabase(ctx, admin, dbURL, coordHost, coordPort, workers); err != nil {
		return "", fmt.Errorf("making the Citus template database %s: %w", name, err)
	}
	for _, u := range nodeURLs {
		if err := sealTemplate(ctx, u, name); err != nil {
			return "", err
		}
	}
	coord := nodeURLs[len(nodeURLs)-1]
	if err := Exec(ctx, coord, "COMMENT ON DATABASE "+pgx.Identifier{name}.Sanitize()+" IS "+quote(citusTemplateReady)); err != nil {
		return "", fmt.Errorf("marking the Citus template %s ready: %w", name, err)
	}
	return name, nil
}

// citusSoftware names the server's PostgreSQL version and the versions of
// the citus and vector extensions it would install.
func citusSoftware(ctx context.Context, admin string) (string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connecting to CITUS_URL: %w", err)
	}
	defer conn.Close(ctx)
	var software string
	err = conn.QueryRow(ctx, `SELECT current_setting('server_version_num') || ' ' || coalesce((SELECT string_agg(name || '=' || default_version, ' ' ORDER BY name)
		FROM pg_available_extensions WHERE name IN ('citus', 'vector')), '')`).Scan(&software)
	if err != nil {
		return "", fmt.Errorf("reading the versions of CITUS_URL's server: %w", err)
	}
	return software, nil
}

// citusTemplateIsReady reports whether every node has the template, sealed,
// and the coordinator (the last of nodeURLs) has it marked ready.
func citusTemplateIsReady(ctx context.Context, nodeURLs []string, name string) (bool, error) {
	for i, u := range nodeURLs {
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			return false, fmt.Errorf("connecting to %s: %w", HostPort(u), err)
		}
		var template bool
		var comment string
		err = conn.QueryRow(ctx, `SELECT datistemplate, coalesce(shobj_description(oid, 'pg_database'), '')
			FROM pg_database WHERE datname = $1`, name).Scan(&template, &comment)
		conn.Close(ctx)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("looking for the Citus template %s on %s: %w", name, HostPort(u), err)
		}
		coordinator := i == len(nodeURLs)-1
		if !template || (coordinator && comment != citusTemplateReady) {
			return false, nil
		}
	}
	return true, nil
}

// sealTemplate makes name a template nobody connects to (CREATE DATABASE
// ... TEMPLATE refuses a source with sessions: Citus's maintenance daemon
// keeps one in every database with the extension).
func sealTemplate(ctx context.Context, serverURL, name string) error {
	id := pgx.Identifier{name}.Sanitize()
	for _, s := range []string{
		"ALTER DATABASE " + id + " WITH ALLOW_CONNECTIONS false IS_TEMPLATE true",
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = " + quote(name),
	} {
		if err := Exec(ctx, serverURL, s); err != nil {
			return fmt.Errorf("sealing the Citus template %s on %s: %w", name, HostPort(serverURL), err)
		}
	}
	return nil
}

// dropTemplate removes what is left of a template on one server.
func dropTemplate(ctx context.Context, serverURL, name string) error {
	id := pgx.Identifier{name}.Sanitize()
	var exists bool
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", HostPort(serverURL), err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil || !exists {
		return err
	}
	for _, s := range []string{"ALTER DATABASE " + id + " IS_TEMPLATE false", "DROP DATABASE " + id + " WITH (FORCE)"} {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("removing the old Citus template %s on %s: %w", name, HostPort(serverURL), err)
		}
	}
	return nil
}

// copyTemplate creates database name on one server as a copy of template.
// A session in the template (a maintenance daemon that outlived the seal)
// is ended and the copy tried again, a few times.
func copyTemplate(ctx context.Context, serverURL, template, name string) error {
	stmt := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	var err error
	for attempt := range 5 {
		if err = Exec(ctx, serverURL, stmt); err == nil {
			return nil
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55006" { // object_in_use: the template has a session
			break
		}
		if sealErr := sealTemplate(ctx, serverURL, template); sealErr != nil {
			return sealErr
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	return fmt.Errorf("creating database %s on %s from the Citus template %s: %w", name, HostPort(serverURL), template, err)
}
