package memory

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkTextSearchConfigs measures text and hybrid search of one owner
// (1,000 memories, in a tenant of 20 such owners) under English, which
// reads the stored tsv column, and under German and simple, which compute
// the words of the rows they rank; it also logs how long the switch of
// each configuration took (building its text index concurrently):
//
//	go test -run '^$' -bench BenchmarkTextSearchConfigs ./internal/memory/
func BenchmarkTextSearchConfigs(b *testing.B) {
	f := newFixture(b)
	f.add(AddRequest{Owner: "owner-0", Content: "Wir wohnen in einem kleinen Haus am See"})
	f.exec(`INSERT INTO %[1]s (id, owner_id, source, category, content, embedding)
		SELECT gen_random_uuid(), 'owner-' || mod(i, 20), 'user', 'contextual',
			'Notiz ' || i || ': ' || (ARRAY['Das Haus', 'Der Garten', 'Das Wetter', 'Die Reise', 'Der Zug'])[1 + mod(i, 5)]
				|| ' ist ' || (ARRAY['schön', 'nass', 'lang', 'teuer', 'spät', 'neu'])[1 + mod(i / 5, 6)],
			(SELECT embedding FROM %[1]s LIMIT 1)
		FROM generate_series(1, 20000) AS i`)
	f.exec(`ANALYZE %s`)
	for _, config := range []string{"english", "german", "simple"} {
		start := time.Now()
		if err := f.setTextSearch(config); err != nil {
			b.Fatal(err)
		}
		b.Logf("switch to %s: %s (index build, switch, grace, drop)", config, time.Since(start).Round(time.Millisecond))
		time.Sleep(2 * time.Second) // past the engine's cache of the configuration
		for _, mode := range []SearchMode{SearchText, SearchHybrid} {
			b.Run(fmt.Sprintf("%s/%s", config, mode), func(b *testing.B) {
				for b.Loop() {
					if _, err := f.store.Search(ctx(b), SearchRequest{Owner: "owner-3", Query: "Haus Garten", Mode: mode}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
