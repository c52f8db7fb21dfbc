package memory

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/tenant"
)

// TestTextSearchSwitchBetweenLocalConfigsStaysBounded (23rd review of issue
// 26, MEDIUM 1): while a switch from german to french fills the rows with
// French vectors, searches still run under german, so every filled row
// takes the fallback of core.TextVector. The fallback parses the first
// core.TextPrefixChars characters of the content, not all of it (whole
// contents made one search cost up to ~18 s for the switch's duration);
// the rows are still found by the words of that start, and a word only
// past it is the trade-off, until the switch ends.
func TestTextSearchSwitchBetweenLocalConfigsStaysBounded(t *testing.T) {
	f := newFixture(t, withTextSearch("german"))
	f.add(AddRequest{Owner: "eve", Content: "Wir wohnen in einem kleinen Haus am See"})
	// 100 memories of ~4 KiB the French fill has already reached: "Haus"
	// at the start, "Schlussstein" only past the first 2,048 characters.
	f.exec(`INSERT INTO %[1]s (id, owner_id, source, category, content, embedding, tsv_config, tsv_local)
		SELECT gen_random_uuid(), 'eve', 'agent', 'contextual', c, (SELECT embedding FROM %[1]s LIMIT 1), 'french', to_tsvector('french', c)
		FROM (SELECT 'Haus ' || i || ' ' || repeat('Garten Wetter Reise Zug ', 170) || 'Schlussstein' AS c
			FROM generate_series(1, 100) AS i) AS x`)
	f.exec(`ANALYZE %s`)

	for name, plan := range germanSearchPlans(t, f, "eve", "Haus") {
		if wholeParse.MatchString(plan) || !strings.Contains(plan, `"left"(m.content, 2048)`) {
			t.Errorf("%s search under german parses whole contents of rows stored under french:\n%s", name, plan)
		}
	}
	if got := f.textMatches("eve", "Haus"); len(got) != 10 {
		t.Errorf("text search Haus found %d rows, want 10 (the start of the rows stored under french is parsed)", len(got))
	}
	if got := f.textMatches("eve", "Schlussstein"); len(got) != 0 {
		t.Errorf("text search Schlussstein found %d rows: more than the start of the content was parsed", len(got))
	}
}

// TestTextSearchRefillSurvivesAnInterruptedGrace (23rd review of issue 26,
// LOW 1): a pass that switched to german and stopped before the fill after
// the grace (the operator restarted) leaves text_search.next set, so the
// next pass fills again: a row a service wrote with the previous
// configuration meanwhile gets its German vector, and next is cleared.
func TestTextSearchRefillSurvivesAnInterruptedGrace(t *testing.T) {
	f := newFixture(t, withTextSearch("german"))
	f.add(AddRequest{Owner: "eve", Content: "Wir wohnen in einem kleinen Haus am See"})
	table := f.store.core.Table("text_search")
	var next *string
	if err := f.admin.QueryRow(ctx(t), `SELECT next FROM `+table).Scan(&next); err != nil || next != nil {
		t.Fatalf("text_search.next after provisioning: %v, %v; want none", next, err)
	}
	// What the stopped pass leaves: the switch done, its fill not, and a
	// row written under english during the grace.
	if _, err := f.admin.Exec(ctx(t), `UPDATE `+table+` SET next = 'german'`); err != nil {
		t.Fatal(err)
	}
	f.exec(`INSERT INTO %[1]s (id, owner_id, source, category, content, embedding)
		SELECT gen_random_uuid(), 'eve', 'agent', 'contextual', 'Die Häuser am Fluss', embedding FROM %[1]s LIMIT 1`)

	if err := f.setTextSearch("german"); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE tsv_config IS DISTINCT FROM 'german'`); n != 0 {
		t.Errorf("%d rows written during the grace keep no German vector after the next pass", n)
	}
	if err := f.admin.QueryRow(ctx(t), `SELECT next FROM `+table).Scan(&next); err != nil || next != nil {
		t.Errorf("text_search.next after the pass: %v, %v; want none", next, err)
	}
}

// provisionText runs a provisioning pass for config and returns its changes.
func provisionText(t *testing.T, f *fixture, config string) []string {
	t.Helper()
	schema := f.store.core.Schema
	res, err := tenant.Provision(ctx(t), f.admin, tenant.Spec{Schema: schema,
		Dimensions: f.store.core.Embedder.Dimensions(), Owner: testOwner(schema), TextSearchConfig: config})
	if err != nil {
		t.Fatalf("provisioning text search %s: %v", config, err)
	}
	return res.Changes
}

// TestTextSearchSwitchBackFillsFirst (24th review of issue 26, LOW 1): a
// switch back to german while german's index is still there (the policy
// went german → french → german within the grace) stores the German
// vectors of the rows written under french before searches switch back,
// not after the grace: until then each of those rows would take the
// fallback parse in every search.
func TestTextSearchSwitchBackFillsFirst(t *testing.T) {
	f := newFixture(t, withTextSearch("german"))
	f.add(AddRequest{Owner: "eve", Content: "Wir wohnen in einem kleinen Haus am See"})
	// What the switch to french left: searches on french, a row written
	// under french, german's index not dropped yet.
	if _, err := f.admin.Exec(ctx(t), `UPDATE `+f.store.core.Table("text_search")+` SET config = 'french', next = NULL, switched_at = now()`); err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE %s SET tsv_config = 'french', tsv_local = to_tsvector('french', content)`)

	changes := provisionText(t, f, "german")
	stored := slices.Index(changes, "stored the german text vectors of 1 memories")
	switched := slices.Index(changes, "switched text search from french to german")
	if stored < 0 || switched < 0 || stored > switched {
		t.Errorf("the switch back's changes %q: want the rows' German vectors stored before the switch", changes)
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE tsv_config IS DISTINCT FROM 'german'`); n != 0 {
		t.Errorf("%d rows keep french after the switch back", n)
	}
}

// TestTextSearchAbandonedFillWaitsTheGrace (24th review of issue 26, LOW
// 2): a pass that finds a fill of french the policy abandoned before its
// switch ends it like a switch: switched_at moves and the fill that gives
// the rows german again runs after the grace, when no service writes
// french any more (a service keeps the next it read for core.TextSearchTTL).
func TestTextSearchAbandonedFillWaitsTheGrace(t *testing.T) {
	f := newFixture(t, withTextSearch("german"))
	f.add(AddRequest{Owner: "eve", Content: "Wir wohnen in einem kleinen Haus am See"})
	table := f.store.core.Table("text_search")
	if _, err := f.admin.Exec(ctx(t), `UPDATE `+table+` SET next = 'french', switched_at = now() - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE %s SET tsv_config = 'french', tsv_local = to_tsvector('french', content)`)

	start := time.Now()
	changes := provisionText(t, f, "german")
	if took := time.Since(start); took < tenant.TextSearchGrace {
		t.Errorf("the pass ended the abandoned fill in %s, before the grace of %s", took, tenant.TextSearchGrace)
	}
	if !slices.Contains(changes, "ended the abandoned french fill of text search german") {
		t.Errorf("the pass's changes %q do not say it ended the abandoned fill", changes)
	}
	var recent bool
	if err := f.admin.QueryRow(ctx(t), `SELECT switched_at > now() - interval '10 minutes' FROM `+table).Scan(&recent); err != nil || !recent {
		t.Errorf("switched_at did not move when the abandoned fill ended (%v)", err)
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE tsv_config IS DISTINCT FROM 'german'`); n != 0 {
		t.Errorf("%d rows keep the abandoned french vectors", n)
	}
}
