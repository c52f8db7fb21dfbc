package memory

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/tenant"
)

// withTextSearch provisions the fixture's tenant with a text search
// configuration, as the operator does for a policy's search.textSearchConfig.
func withTextSearch(config string) fixtureOption {
	return withSpec(func(s *tenant.Spec) { s.TextSearchConfig = config })
}

// setTextSearch provisions the fixture's tenant again with config, as the
// operator does when the policy's configuration changes.
func (f *fixture) setTextSearch(config string) error {
	schema := f.store.core.Schema
	_, err := tenant.Provision(ctx(f.t), f.admin, tenant.Spec{Schema: schema,
		Dimensions: f.store.core.Embedder.Dimensions(), Owner: testOwner(schema), TextSearchConfig: config})
	return err
}

// textHits are the contents a search of owner for query returns, best first.
func (f *fixture) textHits(mode SearchMode, owner, query string) []string {
	f.t.Helper()
	hits, err := f.store.Search(ctx(f.t), SearchRequest{Owner: owner, Query: query, Mode: mode})
	if err != nil {
		f.t.Fatalf("%s search %q: %v", mode, query, err)
	}
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Memory.Content
	}
	return out
}

// textMatches are the contents of the text search hits: text search returns
// only rows whose words match.
func (f *fixture) textMatches(owner, query string) []string {
	return f.textHits(SearchText, owner, query)
}

// textIndexState is the text search configuration of the tenant's row and
// its text indexes with their validity.
func (f *fixture) textIndexState() (string, map[string]bool) {
	f.t.Helper()
	var config string
	if err := f.admin.QueryRow(ctx(f.t), `SELECT config FROM `+f.store.core.Table("text_search")).Scan(&config); err != nil {
		f.t.Fatal(err)
	}
	rows, err := f.admin.Query(ctx(f.t), `SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = $1::regclass AND c.relname LIKE 'memories\_owner\_text%'`, f.store.sql.memories)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	idx := map[string]bool{}
	for rows.Next() {
		var name string
		var valid bool
		if err := rows.Scan(&name, &valid); err != nil {
			f.t.Fatal(err)
		}
		idx[name] = valid
	}
	return config, idx
}

// onlyOne fails unless got is exactly want.
func onlyOne(t *testing.T, what string, got []string, want string) {
	t.Helper()
	if len(got) != 1 || got[0] != want {
		t.Errorf("%s: got %q, want only %q", what, got, want)
	}
}

// TestTextSearchGermanStemming: under german, "Häuser" (plural) finds the
// memory about a "Haus", in text and hybrid search, and the text search
// reads the German text index (its expression matches the queries').
func TestTextSearchGermanStemming(t *testing.T) {
	f := newFixture(t, withTextSearch("german"))
	const haus = "Wir wohnen in einem kleinen Haus am See"
	f.add(AddRequest{Owner: "anna", Content: haus})
	f.add(AddRequest{Owner: "anna", Content: "Der Hund schläft gern im Garten"})
	f.add(AddRequest{Owner: "bert", Content: "Mein Haus ist blau"}) // another owner's

	onlyOne(t, "text search Häuser", f.textMatches("anna", "Häuser"), haus)
	onlyOne(t, "text search Hunde (plural)", f.textMatches("anna", "Hunde"), "Der Hund schläft gern im Garten")
	hits, err := f.store.Search(ctx(t), SearchRequest{Owner: "anna", Query: "Häuser", Mode: SearchHybrid})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) == 0 || hits[0].Memory.Content != haus || hits[0].TextScore <= 0 {
		t.Errorf("hybrid search Häuser: %+v, want %q first with a text score", hits, haus)
	}
	config, idx := f.textIndexState()
	if config != "german" || len(idx) != 1 || !idx["memories_owner_text_stored_german_idx"] {
		t.Errorf("tenant: config %q, text indexes %v; want german and only memories_owner_text_stored_german_idx", config, idx)
	}

	// Rows of other owners, so that reading all of the table's active rows
	// costs more than the text index.
	f.exec(`INSERT INTO %[1]s (id, owner_id, source, category, content, embedding)
		SELECT gen_random_uuid(), 'other-' || mod(i, 50), 'user', 'contextual', 'Notiz ' || i || ' über den Garten',
			(SELECT embedding FROM %[1]s LIMIT 1)
		FROM generate_series(1, 5000) AS i`)
	f.exec(`ANALYZE %s`)
	req := SearchRequest{Owner: "anna", Query: "Häuser", textConfig: "german"}
	q := (*reader)(f.store).buildSearch(SearchText, req, nil, 10, false)
	plan := explainPlan(t, f, q)
	if !strings.Contains(plan, "memories_owner_text_stored_german_idx") {
		t.Errorf("text search does not read the German text index:\n%s", plan)
	}
}

// explainPlan is the plan of q as the login role runs it, with the table
// and the btree index scans that a tenant of a few rows would rather read
// turned off: what is left is an index whose expression matches the query.
func explainPlan(t *testing.T, f *fixture, q searchQuery) string {
	t.Helper()
	tx, err := f.store.core.Pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx(t), `SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off; SET LOCAL enable_indexonlyscan = off`); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx(t), `EXPLAIN (COSTS OFF) `+q.sql, q.args...)
	if err != nil {
		t.Fatal(err)
	}
	return planText(t, rows)
}

// planText is an EXPLAIN's lines as one text.
func planText(t *testing.T, rows pgx.Rows) string {
	t.Helper()
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestTextSearchFrenchStemming: under french, "chevaux" finds "cheval".
func TestTextSearchFrenchStemming(t *testing.T) {
	f := newFixture(t, withTextSearch("french"))
	const cheval = "Le cheval blanc court dans le pré"
	f.add(AddRequest{Owner: "chloe", Content: cheval})
	f.add(AddRequest{Owner: "chloe", Content: "Nous mangeons des crêpes le dimanche"})
	onlyOne(t, "text search chevaux", f.textMatches("chloe", "chevaux"), cheval)
	onlyOne(t, "text search crêpe", f.textMatches("chloe", "crêpe"), "Nous mangeons des crêpes le dimanche")
}

// TestTextSearchSimpleMixedScripts: under simple, Latin, Cyrillic and CJK
// words of one tenant are each found by the exact word; stop words are
// words like any other; nothing is stemmed.
func TestTextSearchSimpleMixedScripts(t *testing.T) {
	f := newFixture(t, withTextSearch("simple"))
	const (
		latin    = "Flight to Lisbon booked for May"
		cyrillic = "Встреча в Москва в понедельник"
		cjk      = "来週 東京 に 行きます"
		stop     = "The Who play tonight"
	)
	for _, c := range []string{latin, cyrillic, cjk, stop} {
		f.add(AddRequest{Owner: "mika", Content: c})
	}
	onlyOne(t, "Lisbon", f.textMatches("mika", "lisbon"), latin)
	onlyOne(t, "Москва", f.textMatches("mika", "Москва"), cyrillic)
	onlyOne(t, "東京", f.textMatches("mika", "東京"), cjk)
	onlyOne(t, "the (a stop word in English)", f.textMatches("mika", "the"), stop)
	if got := f.textMatches("mika", "flights"); len(got) != 0 {
		t.Errorf("simple stems nothing, yet flights found %q", got)
	}
}

// TestTextSearchSwitchWhileSearching: a tenant with data switches from
// english to german while searches run: none fails, and afterwards German
// words match. The English index is gone, the German one valid.
func TestTextSearchSwitchWhileSearching(t *testing.T) {
	f := newFixture(t)
	const haus = "Wir wohnen in einem kleinen Haus am See"
	f.add(AddRequest{Owner: "anna", Content: haus})
	for i := range 60 {
		f.add(AddRequest{Owner: "anna", Content: "Notiz " + strings.Repeat("x", i%7) + " über den Garten und das Wetter " + time.Duration(i).String()})
	}
	if got := f.textMatches("anna", "Häuser"); len(got) != 0 {
		t.Fatalf("english found %q for Häuser; the test needs a word only German stems", got)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	searches := 0
	for _, mode := range []SearchMode{SearchText, SearchHybrid} {
		wg.Go(func() {
			// Bounded in count and time: the switch takes a few seconds.
			deadline := time.Now().Add(2 * time.Minute)
			for i := 0; i < 100000 && time.Now().Before(deadline); i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := f.store.Search(context.Background(), SearchRequest{Owner: "anna", Query: "Häuser Garten", Mode: mode})
				mu.Lock()
				searches++
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	err := f.setTextSearch("german")
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("switching to german: %v", err)
	}
	t.Logf("%d searches ran during the switch", searches)
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("%d searches failed during the switch: %v", len(errs), err)
	}
	time.Sleep(core.TextSearchTTL)
	onlyOne(t, "after the switch, text search Häuser", f.textMatches("anna", "Häuser"), haus)
	config, idx := f.textIndexState()
	if config != "german" || len(idx) != 1 || !idx["memories_owner_text_stored_german_idx"] {
		t.Errorf("after the switch: config %q, text indexes %v; want german and only memories_owner_text_stored_german_idx", config, idx)
	}

	// A pass without a configuration (the policy missing) keeps German; a
	// configuration PostgreSQL does not have is refused, nothing changed.
	if err := f.setTextSearch(""); err != nil {
		t.Fatal(err)
	}
	if err := f.setTextSearch("klingon"); err == nil || !strings.Contains(err.Error(), `"klingon" does not exist`) {
		t.Errorf("klingon: %v", err)
	}
	if config, idx := f.textIndexState(); config != "german" || len(idx) != 1 {
		t.Errorf("after an empty and an unknown configuration: %q, %v", config, idx)
	}

	// And back to English: the index of migration 12 is built again.
	if err := f.setTextSearch("english"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(core.TextSearchTTL)
	if got := f.textMatches("anna", "Häuser"); len(got) != 0 {
		t.Errorf("back in english, Häuser found %q", got)
	}
	if config, idx := f.textIndexState(); config != "english" || len(idx) != 1 || !idx["memories_owner_text_idx"] {
		t.Errorf("back in english: %q, %v", config, idx)
	}
}

// TestTextSearchHistoryAndEpisodesGerman: history search of messages uses
// the tenant's configuration too.
func TestTextSearchHistoryGerman(t *testing.T) {
	f := newFixture(t, withTextSearch("german"))
	f.newSession("anna", "a")
	f.appendTurn("anna", "a", TurnMessage{Role: RoleUser, Content: "Das Haus am See hat drei Zimmer"})
	f.appendTurn("anna", "a", TurnMessage{Role: RoleUser, Content: "Morgen regnet es vielleicht"})
	hits, err := results(f.store.SearchHistory(ctx(t), HistorySearchRequest{Owner: "anna", Query: "Häuser"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) == 0 || !strings.Contains(hits[0].Snippet, "Haus") {
		t.Errorf("history search Häuser: %+v, want the message about the Haus first", hits)
	}
}

// TestTextExpressions: the engine's text expressions are the tenant
// package's, which builds the indexes, for every configuration the policy
// allows (the engine may not import the tenant package, so they are
// written twice); and both accept the same names.
func TestTextExpressions(t *testing.T) {
	for _, config := range TextSearchConfigs() {
		for _, alias := range []string{"", "m."} {
			if got, want := core.OwnerText(config, alias), tenant.OwnerText(config, alias); got != want {
				t.Errorf("%s: engine %s, index %s", config, got, want)
			}
			if got, want := core.TextVector(config, alias), tenant.TextVector(config, alias); got != want {
				t.Errorf("%s: engine %s, tenant %s", config, got, want)
			}
		}
		if !tenant.ValidTextConfigName(config) {
			t.Errorf("the tenant package refuses %q", config)
		}
	}
	if core.DefaultTextConfig != tenant.DefaultTextSearchConfig || DefaultTextSearchConfig != tenant.DefaultTextSearchConfig {
		t.Error("the default configurations differ")
	}
	if core.TextSearchTTL >= tenant.TextSearchGrace {
		t.Errorf("the engine caches the configuration %s, the operator keeps the old index only %s", core.TextSearchTTL, tenant.TextSearchGrace)
	}
}
