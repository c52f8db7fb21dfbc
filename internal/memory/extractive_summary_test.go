package memory

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The extractive path end to end, on real PostgreSQL: what compaction and
// episodes store without an LLM reads like a summary (issue 31).

// checkWholeMessages checks that every line of a summary is a speaker label
// and then whole sentences of the source: here every message is one
// sentence, so a line is "ROLE: " and one message's content, whole.
func checkWholeMessages(t *testing.T, what, summary string, msgs []TurnMessage) {
	t.Helper()
	if summary == "" {
		t.Fatalf("%s: empty", what)
	}
	whole := map[string]bool{}
	for _, m := range msgs {
		whole[strings.ToUpper(string(m.Role))+": "+m.Content] = true
	}
	var bad []string
	for _, line := range strings.Split(summary, "\n") {
		if !whole[line] {
			bad = append(bad, line)
		}
	}
	if len(bad) > 0 {
		t.Errorf("%s: %d lines are not one whole message of the source, e.g. %q, in\n%s", what, len(bad), bad[0], summary)
	}
}

// TestExtractiveEpisodeKeepsWholeSentences: the demo's 3-turn trip recap
// gets an episode of whole sentences, not "USER: Recap 1: the night
// trai...".
func TestExtractiveEpisodeKeepsWholeSentences(t *testing.T) {
	f := newFixture(t)
	f.newSession("alice", "recap")
	var msgs []TurnMessage
	for i, city := range []string{"Lisbon", "Porto", "Sintra"} {
		turn := []TurnMessage{
			userTurn(fmt.Sprintf("Recap %d: the night train to %s was late, please book day trains from now on.", i+1, city)),
			assistantTurn(fmt.Sprintf("Noted for %s: day trains only, window seats when possible.", city)),
		}
		f.appendTurn("alice", "recap", turn...)
		msgs = append(msgs, turn...)
	}
	end, err := f.store.EndSession(ctx(t), EndSessionRequest{Owner: "alice", SessionID: "recap"})
	if err != nil || end.Episode == nil || end.Episode.Method != MethodExtractive {
		t.Fatalf("end: %+v, %v", end, err)
	}
	t.Logf("episode: %q", end.Episode.Summary)
	checkWholeMessages(t, "episode", end.Episode.Summary, msgs)
	if !strings.Contains(end.Episode.Summary, "USER: Recap 1: the night train to Lisbon was late") {
		t.Errorf("the episode lost the first request: %q", end.Episode.Summary)
	}
}

// TestExtractiveCompactionKeepsWholeSentences: the demo's travel chat,
// compacted to a fixed point without an LLM, stores leaves and condensed
// summaries whose every line is a whole message under its speaker (a
// condensed summary keeps its children's speakers), within its size.
func TestExtractiveCompactionKeepsWholeSentences(t *testing.T) {
	f := newFixture(t, withPolicy(func(p *Policy) {
		p.Conversation.Compaction.ChunkSize = 10
		p.Conversation.Compaction.CondenseGroupSize = 3
	}))
	f.newSession("alice", "trip")
	cities := []string{"Lisbon", "Porto", "Coimbra", "Évora", "Braga", "Faro", "Sintra", "Aveiro"}
	var msgs []TurnMessage
	for i := range 60 {
		c := cities[i%len(cities)]
		turn := []TurnMessage{
			userTurn(fmt.Sprintf("Day %d of the trip: what should I see in %s, and how do I get there from the hotel?", i+1, c)),
			assistantTurn(fmt.Sprintf("For day %d in %s: start early at the old town, take the regional train (about 40 minutes), and book the museum online.", i+1, c)),
		}
		f.appendTurn("alice", "trip", turn...)
		msgs = append(msgs, turn...)
	}
	res, err := f.store.CompactSession(ctx(t), CompactSessionRequest{Owner: "alice", SessionID: "trip", Mode: CompactFull, Force: true})
	if err != nil || res.Method != MethodExtractive || res.LeavesCreated == 0 || res.CondensedCreated == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	rows, err := f.admin.Query(ctx(t), `SELECT depth, tokens, content FROM `+f.store.sql.summaries+` ORDER BY depth, earliest_seq`)
	if err != nil {
		t.Fatal(err)
	}
	type stored struct {
		Depth, Tokens int
		Content       string
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[stored])
	if err != nil {
		t.Fatal(err)
	}
	for _, y := range all {
		checkWholeMessages(t, fmt.Sprintf("depth-%d summary", y.Depth), y.Content, msgs)
		if y.Tokens > 600 {
			t.Errorf("a summary of %d tokens", y.Tokens)
		}
	}
	t.Logf("%d summaries; the deepest: %q", len(all), all[len(all)-1].Content)
}
