package tenant

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// TestFreshInstallEqualsReplay provisions one schema the way a new tenant
// gets it (installFresh: every migration in one transaction) and another
// by replaying the migrations one by one, as before issue 32 and as an
// upgrade still does, and compares full dumps of their catalogs — for a
// vector size with and without the covering indexes (OwnerVectors). It
// also checks that the one-step install is what a new tenant gets: one
// transaction, no migration replayed.
func TestFreshInstallEqualsReplay(t *testing.T) {
	testenv.SkipOnCitus(t, "a new tenant on Citus keeps the replay, one migration at a time (Citus forwards DDL one command per query: install.go); TestMigrations* cover it there")
	pool, url := adminPool(t)
	for _, dims := range []int{8, OwnerVectorsMaxDims + 64} {
		t.Run(fmt.Sprintf("dims=%d", dims), func(t *testing.T) {
			ctx := testCtx(t)
			fresh := newSpec(uniqueSchema(t, "engram_fresh"), dims)
			replayed := newSpec(uniqueSchema(t, "engram_replay"), dims)
			replayed.Replay = true
			mustProvision(t, pool, url, fresh)
			mustProvision(t, pool, url, replayed)
			a, b := catalogDump(t, pool, fresh.Schema), catalogDump(t, pool, replayed.Schema)
			if a != b {
				t.Fatalf("one-step install and replay differ:\n%s", lineDiff(a, b))
			}
			if !strings.Contains(a, fmt.Sprintf("migration %d ", LatestVersion)) {
				t.Fatalf("the dump lists no migration %d:\n%s", LatestVersion, a)
			}
			// The replay commits one transaction per migration, the
			// install one for all of them.
			if n := migrationTransactions(t, pool, fresh.Schema); n != 1 {
				t.Errorf("the new tenant's migrations were applied in %d transactions, want 1", n)
			}
			if n := migrationTransactions(t, pool, replayed.Schema); n != LatestVersion {
				t.Errorf("the replayed migrations were applied in %d transactions, want %d", n, LatestVersion)
			}
			if _, err := Provision(ctx, pool, fresh); err != nil {
				t.Fatalf("provisioning the installed schema again: %v", err)
			}
		})
	}
}

// migrationTransactions is how many transactions wrote the rows of
// schema's schema_migrations (their distinct xmin).
func migrationTransactions(t *testing.T, pool *pgxpool.Pool, schema string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(testCtx(t), "SELECT count(DISTINCT xmin::text) FROM "+
		pgx.Identifier{schema, migrationsTable}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// catalogDump describes every object of schema and what owns and may use
// it, from pg_catalog: relations (kind, persistence, owner, options, ACL,
// row security, comment, view text), columns (position, type, not null,
// default, identity, generated, collation, ACL), indexes (definition and
// flags), constraints, triggers, functions (definition, owner, ACL),
// sequences, types, policies, extended statistics, default privileges,
// the schema itself and the rows of schema_migrations (version, name).
// The schema's name, which its roles and owner marker contain, is
// replaced by SCHEMA.
func catalogDump(t *testing.T, pool *pgxpool.Pool, schema string) string {
	t.Helper()
	rows, err := pool.Query(testCtx(t), catalogDumpSQL, schema)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var migrated []string
	mrows, err := pool.Query(testCtx(t), "SELECT 'migration ' || version || ' ' || name FROM "+
		pgx.Identifier{schema, migrationsTable}.Sanitize()+" ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	if migrated, err = pgx.CollectRows(mrows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(append(lines, migrated...), "\n")
	return strings.ReplaceAll(out, schema, "SCHEMA")
}

const catalogDumpSQL = `
WITH s AS (SELECT oid FROM pg_namespace WHERE nspname = $1)
SELECT 'schema owner=' || pg_get_userbyid(n.nspowner) || ' acl=' || coalesce(n.nspacl::text, '') ||
       ' comment=' || coalesce(obj_description(n.oid, 'pg_namespace'), '')
  FROM pg_namespace n WHERE n.oid = (SELECT oid FROM s)
UNION ALL
SELECT 'rel ' || c.relname || ' kind=' || c.relkind::text || ' persistence=' || c.relpersistence::text ||
       ' owner=' || pg_get_userbyid(c.relowner) || ' options=' || coalesce(array_to_string(c.reloptions, ','), '') ||
       ' acl=' || coalesce(c.relacl::text, '') || ' rls=' || c.relrowsecurity || '/' || c.relforcerowsecurity ||
       ' replident=' || c.relreplident::text || ' comment=' || coalesce(obj_description(c.oid, 'pg_class'), '') ||
       CASE WHEN c.relkind IN ('v', 'm') THEN ' view=' || pg_get_viewdef(c.oid) ELSE '' END
  FROM pg_class c WHERE c.relnamespace = (SELECT oid FROM s)
UNION ALL
SELECT 'col ' || c.relname || '.' || a.attname || ' #' || a.attnum || ' ' || format_type(a.atttypid, a.atttypmod) ||
       ' notnull=' || a.attnotnull || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '') ||
       ' identity=' || a.attidentity::text || ' generated=' || a.attgenerated::text ||
       ' collation=' || coalesce(co.collname, '') || ' storage=' || a.attstorage::text || ' compression=' || a.attcompression::text ||
       ' acl=' || coalesce(a.attacl::text, '') || ' comment=' || coalesce(col_description(c.oid, a.attnum), '')
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
 WHERE c.relnamespace = (SELECT oid FROM s) AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'idx ' || ic.relname || ' ' || pg_get_indexdef(i.indexrelid) || ' valid=' || i.indisvalid ||
       ' ready=' || i.indisready || ' live=' || i.indislive || ' unique=' || i.indisunique ||
       ' primary=' || i.indisprimary || ' clustered=' || i.indisclustered
  FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid WHERE ic.relnamespace = (SELECT oid FROM s)
UNION ALL
SELECT 'con ' || cl.relname || '.' || con.conname || ' ' || con.contype::text || ' ' || pg_get_constraintdef(con.oid) ||
       ' deferrable=' || con.condeferrable || '/' || con.condeferred || ' validated=' || con.convalidated
  FROM pg_constraint con LEFT JOIN pg_class cl ON cl.oid = con.conrelid WHERE con.connamespace = (SELECT oid FROM s)
UNION ALL
SELECT 'trg ' || pg_get_triggerdef(tg.oid) || ' enabled=' || tg.tgenabled::text
  FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid WHERE c.relnamespace = (SELECT oid FROM s) AND NOT tg.tgisinternal
UNION ALL
SELECT 'fn ' || p.proname || ' kind=' || p.prokind::text || ' owner=' || pg_get_userbyid(p.proowner) ||
       ' acl=' || coalesce(p.proacl::text, '') || ' config=' || coalesce(array_to_string(p.proconfig, ','), '') ||
       CASE WHEN p.prokind IN ('f', 'p') THEN ' def=' || pg_get_functiondef(p.oid) ELSE '' END
  FROM pg_proc p WHERE p.pronamespace = (SELECT oid FROM s)
UNION ALL
SELECT 'seq ' || c.relname || ' ' || format_type(q.seqtypid, NULL) || ' start=' || q.seqstart ||
       ' inc=' || q.seqincrement || ' min=' || q.seqmin || ' max=' || q.seqmax || ' cache=' || q.seqcache || ' cycle=' || q.seqcycle
  FROM pg_sequence q JOIN pg_class c ON c.oid = q.seqrelid WHERE c.relnamespace = (SELECT oid FROM s)
UNION ALL
SELECT 'type ' || ty.typname || ' ' || ty.typtype::text || ' owner=' || pg_get_userbyid(ty.typowner) || ' acl=' || coalesce(ty.typacl::text, '')
  FROM pg_type ty WHERE ty.typnamespace = (SELECT oid FROM s)
UNION ALL
SELECT 'policy ' || pol.tablename || '.' || pol.policyname || ' ' || pol.permissive || ' ' || pol.cmd ||
       ' roles=' || pol.roles::text || ' using=' || coalesce(pol.qual, '') || ' check=' || coalesce(pol.with_check, '')
  FROM pg_policies pol WHERE pol.schemaname = $1
UNION ALL
SELECT 'stat ' || st.stxname || ' ' || pg_get_statisticsobjdef(st.oid)
  FROM pg_statistic_ext st WHERE st.stxnamespace = (SELECT oid FROM s)
UNION ALL
SELECT 'defacl ' || pg_get_userbyid(da.defaclrole) || ' ' || da.defaclobjtype::text || ' ' || da.defaclacl::text
  FROM pg_default_acl da WHERE da.defaclnamespace = (SELECT oid FROM s)
ORDER BY 1`

// lineDiff lists the lines only one of a and b has.
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for l := range strings.SplitSeq(s, "\n") {
			m[l] = true
		}
		return m
	}
	ina, inb := in(a), in(b)
	var out []string
	for l := range ina {
		if !inb[l] {
			out = append(out, "only one-step: "+l)
		}
	}
	for l := range inb {
		if !ina[l] {
			out = append(out, "only replay:   "+l)
		}
	}
	return strings.Join(out, "\n")
}
