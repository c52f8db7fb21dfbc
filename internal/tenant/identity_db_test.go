package tenant

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestIdentifyWithAndWithoutSystemIdentifier: a superuser reads the
// server's system identifier; a role that may not call pg_control_system()
// (revoked, as some managed services do) gets the same database OID and no
// identifier, not an error; HoldsTenant sees a schema of that database
// only when it carries the owner's UID marker.
func TestIdentifyWithAndWithoutSystemIdentifier(t *testing.T) {
	in := testenv.NewInstance(t, "tenant-identity")
	in.Start(t)
	dbURL := in.NewDatabase(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(raw string) *pgxpool.Pool {
		p, err := pgxpool.New(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	owner := Owner{UID: "3f0c1a52-identity", Namespace: "team-a", Name: "bot"}
	super, err := Identify(ctx, open(dbURL))
	if err != nil {
		t.Fatal(err)
	}
	if super.System == "" || super.DatabaseOID == 0 || "/"+super.Database != u.Path {
		t.Fatalf("as superuser: %+v", super)
	}
	for _, stmt := range []string{
		`CREATE ROLE identity_reader LOGIN PASSWORD 'identity-reader'`,
		`REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC`,
		`CREATE SCHEMA identity_probe`,
		`CREATE SCHEMA identity_owned`,
		`COMMENT ON SCHEMA identity_owned IS '` + owner.marker() + `'`,
	} {
		if err := testenv.Exec(ctx, dbURL, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = testenv.Exec(c, dbURL, `GRANT EXECUTE ON FUNCTION pg_control_system() TO PUBLIC`)
		_ = testenv.Exec(c, dbURL, `DROP SCHEMA identity_probe`)
		_ = testenv.Exec(c, dbURL, `DROP SCHEMA identity_owned`)
		_ = testenv.Exec(c, dbURL, `DROP ROLE identity_reader`)
	})
	u.User = url.UserPassword("identity_reader", "identity-reader")
	reader := open(u.String())
	got, err := Identify(ctx, reader)
	if err != nil {
		t.Fatalf("without pg_control_system(): %v", err)
	}
	if got.System != "" || got.DatabaseOID != super.DatabaseOID || got.Database != super.Database {
		t.Errorf("without pg_control_system(): %+v, want OID %d and no system identifier", got, super.DatabaseOID)
	}
	if !super.Same(got) || super.Verifiable(got) {
		t.Errorf("Same = %v, Verifiable = %v; want true, false", super.Same(got), super.Verifiable(got))
	}
	other := Owner{UID: "another-uid", Namespace: owner.Namespace, Name: owner.Name}
	// A runtime recreated with a new UID and the adopt annotation naming
	// the old one holds it too, as provisioning would take it.
	if has, err := HoldsTenant(ctx, reader, "identity_owned", other, Claim{AdoptFromUID: owner.UID}); err != nil || !has {
		t.Errorf("HoldsTenant with the adopt annotation's UID = %v, %v; want true", has, err)
	}
	for _, c := range []struct {
		schema string
		owner  Owner
		want   bool
	}{
		{"identity_owned", owner, true},
		{"identity_owned", other, false}, // same name and runtime, another UID
		{"identity_probe", owner, false}, // exists, no marker
		{"identity_absent", owner, false},
	} {
		if has, err := HoldsTenant(ctx, reader, c.schema, c.owner, Claim{}); err != nil || has != c.want {
			t.Errorf("HoldsTenant(%s, uid %s) = %v, %v; want %v", c.schema, c.owner.UID, has, err, c.want)
		}
	}
}
