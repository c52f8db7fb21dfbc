package tenant

import (
	"context"
	"strings"
	"testing"
)

// TestTenantTempFilesAreLimited (issue 26's fourth review, MEDIUM 2): one
// sort of a tenant's with a tiny work_mem wrote 544 MB of temporary files,
// and temp_file_limit was -1; enough of them fill the server's disk, and
// the server stops for every tenant. Provisioning sets the login role's
// temp_file_limit (1MB here); the tenant cannot SET it away nor reset its
// role's default, and a sort over it fails. The next pass changes nothing.
func TestTenantTempFilesAreLimited(t *testing.T) {
	ctx := testCtx(t)
	pool, url := adminPool(t)
	spec := newSpec(uniqueSchema(t, "engram_tempfiles"), 3)
	spec.TempFileLimit = "1MB"
	res := mustProvision(t, pool, url, spec)
	conn := loginConn(t, url, res, res.Password)
	var have string
	if err := conn.QueryRow(ctx, "SHOW temp_file_limit").Scan(&have); err != nil || have != "1MB" {
		t.Fatalf("the login role's temp_file_limit: %q, %v; want 1MB", have, err)
	}
	for _, stmt := range []string{"SET temp_file_limit = '1GB'", "SET temp_file_limit = -1", "ALTER ROLE CURRENT_USER RESET temp_file_limit", "ALTER ROLE CURRENT_USER SET temp_file_limit = -1"} {
		if _, err := conn.Exec(ctx, stmt); err == nil {
			t.Errorf("the tenant ran %q; want it refused", stmt)
		}
	}
	if _, err := conn.Exec(ctx, "SET work_mem = '64kB'"); err != nil {
		t.Fatal(err)
	}
	var n int
	err := conn.QueryRow(ctx, "SELECT count(*) FROM (SELECT g, md5(g::text) FROM generate_series(1, 100000) g ORDER BY 2) s").Scan(&n)
	if err == nil || !strings.Contains(err.Error(), "temporary file size exceeds temp_file_limit") {
		t.Fatalf("a sort over the limit: %v; want \"temporary file size exceeds temp_file_limit\"", err)
	}
	if again, err := Provision(ctx, pool, spec); err != nil || again.Changed() || len(again.Warnings) > 0 {
		t.Fatalf("re-provisioning: %+v, %v; want no change", again, err)
	}
}

// TestTempFileLimitNeedsTheDBA: an admin that is not a superuser and was
// not granted SET ON PARAMETER temp_file_limit may not set it: the
// provisioning succeeds with a warning naming what a superuser runs
// (the DBAActionNeeded event); after the grant, the next pass sets it.
func TestTempFileLimitNeedsTheDBA(t *testing.T) {
	ctx := testCtx(t)
	pool, url, superURL := restrictedAdmin(t, false)
	spec := newSpec(uniqueSchema(t, "engram_tempfiles_dba"), 3)
	spec.TempFileLimit = "1MB"
	res := mustProvision(t, pool, superURL, spec)
	var warning string
	for _, w := range res.Warnings {
		if strings.Contains(w, "temp_file_limit") {
			warning = w
		}
	}
	for _, want := range []string{res.LoginRole, "ALTER ROLE", "SET temp_file_limit = '1MB'", "GRANT SET ON PARAMETER temp_file_limit"} {
		if !strings.Contains(warning, want) {
			t.Fatalf("the warning %q (of %q) does not say %q", warning, res.Warnings, want)
		}
	}
	conn := loginConn(t, url, res, res.Password)
	var have string
	if err := conn.QueryRow(ctx, "SHOW temp_file_limit").Scan(&have); err != nil || have != "-1" {
		t.Fatalf("temp_file_limit without the DBA: %q, %v; want -1 (nothing set)", have, err)
	}
	_ = conn.Close(context.Background())
}
