package memory

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/tenant"
)

// wholeParse is how a plan shows the parse of a memory's whole content
// under german; the fallback of a row whose stored vector is of another
// configuration (the ELSE of core.TextVector) parses only its start,
// left(m.content, 2048).
var wholeParse = regexp.MustCompile(`to_tsvector\('german'::regconfig, m\.content\)`)

// explainVerbose is the EXPLAIN (VERBOSE) plan of q as the login role runs it.
func explainVerbose(t *testing.T, f *fixture, q searchQuery) string {
	t.Helper()
	rows, err := f.store.core.Pool.Query(ctx(t), `EXPLAIN (VERBOSE, COSTS OFF) `+q.sql, q.args...)
	if err != nil {
		t.Fatal(err)
	}
	return planText(t, rows)
}

// germanSearchPlans are the EXPLAIN (VERBOSE) plans of owner's text and
// hybrid search for query under german, by mode.
func germanSearchPlans(t *testing.T, f *fixture, owner, query string) map[string]string {
	t.Helper()
	vecs, err := f.store.core.Embedder.Embed(ctx(t), []string{query})
	if err != nil {
		t.Fatal(err)
	}
	req := SearchRequest{Owner: owner, Query: query, textConfig: "german"}
	r := (*reader)(f.store)
	return map[string]string{
		"text":   explainVerbose(t, f, r.buildSearch(SearchText, req, nil, 10, false)),
		"hybrid": explainVerbose(t, f, r.hybridSQL(req, vecs[0], 10, 40)),
	}
}

// TestTextSearchGermanDoesNotParseEveryMatch (22nd review of issue 26, NEW
// 2): under german, text and hybrid search of an owner whose 1,000
// memories all match read each row's stored vector (tsv_local, written by
// the add path) instead of parsing its content: the plans parse content
// only as the fallback of a row stored under another configuration, and a
// row whose stored vector says otherwise than its content is found by the
// stored words, not by the content's.
func TestTextSearchGermanDoesNotParseEveryMatch(t *testing.T) {
	f := newFixture(t, withTextSearch("german"))
	const haus = "Wir wohnen in einem kleinen Haus am See"
	f.add(AddRequest{Owner: "eve", Content: haus})
	if n := f.count(`SELECT count(*) FROM %s WHERE tsv_config = 'german' AND tsv_local = to_tsvector('german', content)`); n != 1 {
		t.Fatalf("the add stored %d German vectors, want 1", n)
	}
	// 1,000 more of eve, each about 4 KiB that matches "Haus", stored as
	// the add path stores them.
	f.exec(`INSERT INTO %[1]s (id, owner_id, source, category, content, embedding, tsv_config, tsv_local)
		SELECT gen_random_uuid(), 'eve', 'agent', 'contextual', c, (SELECT embedding FROM %[1]s LIMIT 1), 'german', to_tsvector('german', c)
		FROM (SELECT 'Notiz ' || i || ' ' || repeat('Haus Garten Wetter Reise Zug schön nass lang teuer spät neu ', 64) AS c
			FROM generate_series(1, 1000) AS i) AS x`)
	f.exec(`ANALYZE %s`)

	for name, plan := range germanSearchPlans(t, f, "eve", "Haus") {
		if wholeParse.MatchString(plan) || !strings.Contains(plan, "tsv_local") {
			t.Errorf("%s search under german parses the content of every row instead of reading tsv_local:\n%s", name, plan)
		}
	}

	// The row about the Haus now stores other words than its content's:
	// searches find it by those, and no longer by its content's.
	f.exec(`UPDATE %s SET tsv_local = to_tsvector('german', 'Zauberwörter im Keller') WHERE content = $1`, haus)
	onlyOne(t, "text search Zauberwort (stored words only)", f.textMatches("eve", "Zauberwort"), haus)
	if got := f.textMatches("eve", "See"); len(got) != 0 {
		t.Errorf("text search See (content only) found %d rows: the content was parsed", len(got))
	}
	hits, err := f.store.Search(ctx(t), SearchRequest{Owner: "eve", Query: "Zauberwort", Mode: SearchHybrid})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(hits, func(h SearchHit) bool { return h.Memory.Content == haus && h.TextScore > 0 }) {
		t.Errorf("hybrid search Zauberwort: the row is not among %d hits with a text score", len(hits))
	}
}

// TestTextSearchSwitchFillsStoredVectors: rows written under english have
// no German vector; the switch to german stores it for every row (in
// batches, resuming an interrupted fill without redoing its rows) before
// the German index is built, so a German-stemmed query finds rows written
// before the switch and after it, and the service writes German vectors
// from then on. A second pass stores nothing.
func TestTextSearchSwitchFillsStoredVectors(t *testing.T) {
	f := newFixture(t)
	const haus = "Wir wohnen in einem kleinen Haus am See"
	f.add(AddRequest{Owner: "anna", Content: haus})
	for i := range 250 { // more than two fill batches
		f.exec(`INSERT INTO %[1]s (id, owner_id, source, category, content, embedding)
			SELECT gen_random_uuid(), 'anna', 'agent', 'contextual', 'Notiz ' || $1::int || ' über den Garten', embedding FROM %[1]s LIMIT 1`, i)
	}
	// Messages of two sessions, each past a batch: the fill walks their
	// key (owner, session, seq) across sessions.
	messages := f.store.core.Table("messages")
	for _, session := range []string{"a", "b"} {
		f.newSession("anna", session)
		if _, err := f.admin.Exec(ctx(t), `INSERT INTO `+messages+` (owner_id, session_id, seq, role, content, tokens)
			SELECT 'anna', $1, i, 'user', 'Die Häuser ' || i, 3 FROM generate_series(1, 130) AS i`, session); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE tsv_config IS NOT NULL OR tsv_local IS NOT NULL`); n != 0 {
		t.Fatalf("%d rows store a vector under english, want none (tsv holds it)", n)
	}
	// An interrupted fill: 100 rows already hold German vectors.
	f.exec(`UPDATE %[1]s SET tsv_config = 'german', tsv_local = to_tsvector('german', content)
		WHERE id IN (SELECT id FROM %[1]s WHERE content <> $1 ORDER BY id LIMIT 100)`, haus)

	schema := f.store.core.Schema
	spec := tenant.Spec{Schema: schema, Dimensions: f.store.core.Embedder.Dimensions(), Owner: testOwner(schema), TextSearchConfig: "german"}
	res, err := tenant.Provision(ctx(t), f.admin, spec)
	if err != nil {
		t.Fatalf("switching to german: %v", err)
	}
	if !slices.Contains(res.Changes, "stored the german text vectors of 151 memories") || !slices.Contains(res.Changes, "stored the german text vectors of 260 messages") {
		t.Errorf("the switch's changes %q do not say it stored the 151 memories left and the 260 messages", res.Changes)
	}
	var stale int64
	if err := f.admin.QueryRow(ctx(t), `SELECT count(*) FROM `+messages+` WHERE tsv_config IS DISTINCT FROM 'german' OR tsv_local IS DISTINCT FROM to_tsvector('german', content)`).Scan(&stale); err != nil || stale != 0 {
		t.Errorf("%d messages lack their German vector after the switch (%v)", stale, err)
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE tsv_config IS DISTINCT FROM 'german' OR tsv_local IS DISTINCT FROM to_tsvector('german', content)`); n != 0 {
		t.Errorf("%d rows lack their German vector after the switch", n)
	}
	time.Sleep(2 * time.Second) // past the engine's cache of the configuration
	const after = "Die Häuser am Fluss sind alt"
	f.add(AddRequest{Owner: "anna", Content: after})
	if n := f.count(`SELECT count(*) FROM %s WHERE content = $1 AND tsv_config = 'german'`, after); n != 1 {
		t.Errorf("the add after the switch stored no German vector")
	}
	got := f.textMatches("anna", "Häuser")
	slices.Sort(got)
	if want := []string{after, haus}; !slices.Equal(got, want) {
		t.Errorf("text search Häuser after the switch: %q, want %q", got, want)
	}
	res, err = tenant.Provision(ctx(t), f.admin, spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Changes {
		if strings.Contains(c, "text") {
			t.Errorf("a second pass changed the text search: %q", c)
		}
	}

	// A fill of french that the policy abandoned before its switch (the
	// operator stopped, then the policy went back to german): the pass for
	// german ends it and stores german again in the rows it rewrote.
	if _, err := f.admin.Exec(ctx(t), `UPDATE `+f.store.core.Table("text_search")+` SET next = 'french'`); err != nil {
		t.Fatal(err)
	}
	f.exec(`UPDATE %[1]s SET tsv_config = 'french', tsv_local = to_tsvector('french', content) WHERE id IN (SELECT id FROM %[1]s ORDER BY id LIMIT 30)`)
	if _, err := tenant.Provision(ctx(t), f.admin, spec); err != nil {
		t.Fatal(err)
	}
	if n := f.count(`SELECT count(*) FROM %s WHERE tsv_config IS DISTINCT FROM 'german'`); n != 0 {
		t.Errorf("%d rows keep the abandoned french vectors", n)
	}
	var next *string
	if err := f.admin.QueryRow(ctx(t), `SELECT next FROM `+f.store.core.Table("text_search")).Scan(&next); err != nil || next != nil {
		t.Errorf("text_search.next after the pass: %v, %v; want none", next, err)
	}
}

// historyScore is the score of the best history hit of anna for query.
func historyScore(t *testing.T, f *fixture, query string) float64 {
	t.Helper()
	hits, err := results(f.store.SearchHistory(ctx(t), HistorySearchRequest{Owner: "anna", Query: query}))
	if err != nil || len(hits) == 0 {
		t.Fatalf("history search %q: %+v, %v", query, hits, err)
	}
	return hits[0].Score
}

// TestTextSearchHistoryAndEpisodesReadStoredVectors (22nd review of issue
// 26, NEW 2): under german, messages and episodes are written with their
// German vector, and history search and episode ranking read it instead of
// parsing each of the owner's rows: once the stored words are changed,
// they score by those.
func TestTextSearchHistoryAndEpisodesReadStoredVectors(t *testing.T) {
	f := newFixture(t, withTextSearch("german"))
	f.newSession("anna", "s")
	f.appendTurn("anna", "s", TurnMessage{Role: RoleUser, Content: "Das Haus am See hat drei Zimmer"})
	for _, q := range []string{"Wie groß ist der Garten?", "Wann fährt der Zug?"} { // an episode needs three user turns
		f.appendTurn("anna", "s", TurnMessage{Role: RoleUser, Content: q}, TurnMessage{Role: RoleAssistant, Content: "Bald."})
	}
	if res, err := f.store.EndSession(ctx(t), EndSessionRequest{Owner: "anna", SessionID: "s"}); err != nil || res.Episode == nil {
		t.Fatalf("end session: %+v, %v", res, err)
	}
	messages, episodes := f.store.core.Table("messages"), f.store.core.Table("episodes")
	for _, table := range []string{messages, episodes} {
		var stored, all int64
		if err := f.admin.QueryRow(ctx(t), `SELECT count(*) FILTER (WHERE tsv_config = 'german' AND tsv_local IS NOT NULL), count(*) FROM `+table).Scan(&stored, &all); err != nil {
			t.Fatal(err)
		}
		if all == 0 || stored != all {
			t.Errorf("%s: %d of %d rows store their German vector", table, stored, all)
		}
	}

	before := historyScore(t, f, "Zauberwort")
	if got := episodeTextScore(t, f, "Zimmer"); got <= 0 {
		t.Fatalf("episode search Zimmer before the stored words changed: text score %v; the test needs the word in the episode", got)
	}
	for _, table := range []string{messages, episodes} {
		if _, err := f.admin.Exec(ctx(t), `UPDATE `+table+` SET tsv_local = to_tsvector('german', 'Zauberwörter im Keller')`); err != nil {
			t.Fatal(err)
		}
	}
	if after := historyScore(t, f, "Zauberwort"); after <= before {
		t.Errorf("history search Zauberwort (stored words only): score %v, %v before the stored words changed: the content was parsed", after, before)
	}
	for query, matches := range map[string]bool{"Zauberwort": true, "Zimmer": false} {
		if got := episodeTextScore(t, f, query); (got > 0) != matches {
			t.Errorf("episode search %q: text score %v, want a match %v (the stored words)", query, got, matches)
		}
	}
}

// episodeTextScore is the text score of anna's one episode for query.
func episodeTextScore(t *testing.T, f *fixture, query string) float64 {
	t.Helper()
	res, err := f.store.SearchEpisodes(ctx(t), EpisodeSearchRequest{Owner: "anna", Query: query})
	if err != nil || len(res.Results) != 1 {
		t.Fatalf("episode search %q: %+v, %v", query, res, err)
	}
	return res.Results[0].TextScore
}
