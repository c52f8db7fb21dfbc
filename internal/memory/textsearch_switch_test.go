package memory

import (
	"strings"
	"testing"
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
