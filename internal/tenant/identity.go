package tenant

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ServerIdentity is which PostgreSQL server and database a connection
// reaches, as the server tells it: a URL cannot say it (a host may be an
// alias of another, and one Secret may be edited to name another server).
type ServerIdentity struct {
	// System is the server's system identifier (pg_control_system()),
	// shared by its physical replicas; empty when the role may not read it.
	System string
	// Database and DatabaseOID name the connection's database.
	Database    string
	DatabaseOID int64
}

// Same reports whether a and b are one server's one database. A side
// without a system identifier is compared by database OID only, which
// two fresh servers may share: the caller asks for more then
// (Verifiable).
func (a ServerIdentity) Same(b ServerIdentity) bool {
	if a.System != "" && b.System != "" && a.System != b.System {
		return false
	}
	return a.DatabaseOID == b.DatabaseOID
}

// Verifiable reports whether Same of a and b proves one server: both
// carry a system identifier.
func (a ServerIdentity) Verifiable(b ServerIdentity) bool { return a.System != "" && b.System != "" }

func (a ServerIdentity) String() string {
	sys := a.System
	if sys == "" {
		sys = "(system identifier not readable)"
	}
	return fmt.Sprintf("server %s, database %s (OID %d)", sys, a.Database, a.DatabaseOID)
}

// Identify asks the server behind admin which server and database it is,
// in one round trip; a second asks for the database alone when the role
// may not read the system identifier.
func Identify(ctx context.Context, admin *pgxpool.Pool) (ServerIdentity, error) {
	var id ServerIdentity
	err := admin.QueryRow(ctx, `SELECT d.oid::int8, d.datname, s.system_identifier::text
		FROM pg_database d, pg_control_system() s WHERE d.datname = current_database()`).Scan(&id.DatabaseOID, &id.Database, &id.System)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && unreadableIdentifier[pgErr.Code] {
		// Revoked from the role, or a server without the function (some
		// managed services): see Same.
		id = ServerIdentity{}
		err = admin.QueryRow(ctx, `SELECT oid::int8, datname FROM pg_database WHERE datname = current_database()`).Scan(&id.DatabaseOID, &id.Database)
	}
	if err != nil {
		return id, fmt.Errorf("asking the server which server and database it is: %w", err)
	}
	return id, id.check()
}

// check refuses what no PostgreSQL answers: a system identifier is a
// 64-bit number, a database name at most 63 bytes. A server the tenant
// runs (connectionSecretRef) may answer anything, and the identity goes
// into status and into messages.
func (a ServerIdentity) check() error {
	if len(a.Database) > 63 {
		return fmt.Errorf("the server names its database with %d bytes, more than PostgreSQL allows (63)", len(a.Database))
	}
	if _, err := strconv.ParseUint(a.System, 10, 64); a.System != "" && err != nil {
		return fmt.Errorf("the server's system identifier is not a 64-bit number (%d bytes)", len(a.System))
	}
	return nil
}

// unreadableIdentifier are the answers that mean the role may never read
// the system identifier on this server (any other error is retried: a
// server starting up must not be taken for one without it).
var unreadableIdentifier = map[string]bool{
	"42501": true, // insufficient_privilege
	"42883": true, // undefined_function
	"0A000": true, // feature_not_supported
}

// HoldsTenant reports whether the database of admin holds owner's tenant:
// schema exists and provisioning would take it as owner's (its UID marker,
// or what claim allows: the adopt annotation's UID, a legacy marker the
// runtime's status records). A schema of that name with another marker or
// none (made by hand, by another runtime) is not proof that the tenant's
// data is there.
func HoldsTenant(ctx context.Context, admin *pgxpool.Pool, schema string, owner Owner, claim Claim) (bool, error) {
	c, err := admin.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("connecting as admin: %w", err)
	}
	defer c.Release()
	exists, m, err := schemaState(ctx, c.Conn(), schema)
	if err != nil {
		return false, fmt.Errorf("looking for schema %s: %w", schema, err)
	}
	if !exists {
		return false, nil
	}
	_, refused := decideClaim(exists, m, owner, claim, "schema", schema, false)
	return refused == nil, nil
}
