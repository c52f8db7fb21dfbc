package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/memory/core"
)

// sameJSON reports whether two JSON texts hold the same value, numbers
// compared as written (jsonb keeps them exact).
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	for _, p := range []struct {
		in  []byte
		out *any
	}{{a, &x}, {b, &y}} {
		d := json.NewDecoder(bytes.NewReader(p.in))
		d.UseNumber()
		if err := d.Decode(p.out); err != nil {
			t.Fatalf("decoding %s: %v", p.in, err)
		}
	}
	return reflect.DeepEqual(x, y)
}

func TestMetadataAndTagsRoundTrip(t *testing.T) {
	f := newFixture(t)
	meta := json.RawMessage(`{"project": "lisbon", "big": 12345678901234567890, "nested": {"a": [1, 2.5, "x"]},
		"'); DROP TABLE memories; --": "kept as data"}`)
	tags := []string{"travel", "2026", "o'clock"}
	r := f.add(AddRequest{Owner: "u1", Content: "Alice flies to Lisbon in May", Metadata: meta, Tags: tags})
	check := func(where string, m Memory) {
		t.Helper()
		if !sameJSON(t, m.Metadata, meta) || !reflect.DeepEqual(m.Tags, tags) {
			t.Errorf("%s: metadata %s tags %q, want %s %q", where, m.Metadata, m.Tags, meta, tags)
		}
	}
	check("add", r.Memory)
	got, err := f.store.Get(ctx(t), "u1", r.Memory.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("get", *got)
	page, err := f.store.List(ctx(t), ListRequest{Owner: "u1"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("list: %v %+v", err, page)
	}
	check("list", page.Items[0])
	for _, mode := range []SearchMode{SearchVector, SearchHybrid, SearchText} {
		hits, err := f.store.Search(ctx(t), SearchRequest{Owner: "u1", Query: "Lisbon", Mode: mode})
		if err != nil || len(hits) != 1 {
			t.Fatalf("search %s: %v %+v", mode, err, hits)
		}
		check("search "+string(mode), hits[0].Memory)
	}
	// Another owner sees none of it.
	if hits, _ := f.store.Search(ctx(t), SearchRequest{Owner: "u2", Query: "Lisbon"}); len(hits) != 0 {
		t.Fatalf("owner u2 found %+v", hits)
	}
	hist, err := f.store.History(ctx(t), HistoryRequest{Owner: "u1", ID: r.Memory.ID})
	if err != nil {
		t.Fatal(err)
	}
	d := hist.Items[0].Details
	// (History details are read as float64: compare a text value.)
	if hm, _ := d["metadata"].(map[string]any); hm["project"] != "lisbon" || !reflect.DeepEqual(d["tags"], []any{"travel", "2026", "o'clock"}) {
		t.Fatalf("the add's history details %v do not record metadata and tags", d)
	}
	// A memory without them shows none.
	plain := f.add(AddRequest{Owner: "u1", Content: "Alice keeps bees"})
	if plain.Memory.Metadata != nil || plain.Memory.Tags != nil {
		t.Fatalf("a memory without labels: %s %q", plain.Memory.Metadata, plain.Memory.Tags)
	}
	js, _ := json.Marshal(plain.Memory)
	if bytes.Contains(js, []byte(`"metadata"`)) || bytes.Contains(js, []byte(`"tags"`)) {
		t.Fatalf("JSON of a memory without labels: %s", js)
	}
}

func TestMetadataAndTagsUpdateAndMerge(t *testing.T) {
	f := newFixture(t)
	r := f.add(AddRequest{Owner: "u1", Content: "Alice lives in Porto", Metadata: json.RawMessage(`{"v": 1}`), Tags: []string{"home"}})
	m, err := f.store.Update(ctx(t), UpdateRequest{Owner: "u1", ID: r.Memory.ID, Metadata: json.RawMessage(`{"v": 2}`), Tags: []string{"home", "city"}})
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, m.Metadata, []byte(`{"v": 2}`)) || !reflect.DeepEqual(m.Tags, []string{"home", "city"}) || m.Content != r.Memory.Content {
		t.Fatalf("after update: %+v", m)
	}
	hist, err := f.store.History(ctx(t), HistoryRequest{Owner: "u1", ID: r.Memory.ID})
	if err != nil {
		t.Fatal(err)
	}
	d := hist.Items[len(hist.Items)-1].Details
	if !reflect.DeepEqual(d["previousTags"], []any{"home"}) || !reflect.DeepEqual(d["tags"], []any{"home", "city"}) ||
		!reflect.DeepEqual(d["previousMetadata"], map[string]any{"v": float64(1)}) || !reflect.DeepEqual(d["metadata"], map[string]any{"v": float64(2)}) {
		t.Fatalf("the update's history details: %v", d)
	}
	// An update of other fields keeps them.
	imp := 8
	if m, err = f.store.Update(ctx(t), UpdateRequest{Owner: "u1", ID: r.Memory.ID, Importance: &imp}); err != nil || m.Tags == nil || m.Metadata == nil {
		t.Fatalf("an importance update lost the labels: %v %+v", err, m)
	}
	// A merge without labels keeps the row's; with labels replaces them.
	merged := f.add(AddRequest{Owner: "u1", Content: "Alice lives in Porto"})
	if merged.Action != ActionMerged || !reflect.DeepEqual(merged.Memory.Tags, []string{"home", "city"}) {
		t.Fatalf("merge without labels: %s %q", merged.Action, merged.Memory.Tags)
	}
	merged = f.add(AddRequest{Owner: "u1", Content: "Alice lives in Porto", Tags: []string{"moved"}, Metadata: json.RawMessage(`{"v": 3}`)})
	if merged.Action != ActionMerged || !reflect.DeepEqual(merged.Memory.Tags, []string{"moved"}) || !sameJSON(t, merged.Memory.Metadata, []byte(`{"v": 3}`)) {
		t.Fatalf("merge with labels: %s %q %s", merged.Action, merged.Memory.Tags, merged.Memory.Metadata)
	}
	// {} and [] clear them.
	if m, err = f.store.Update(ctx(t), UpdateRequest{Owner: "u1", ID: r.Memory.ID, Metadata: json.RawMessage(`{}`), Tags: []string{}}); err != nil {
		t.Fatal(err)
	}
	if m.Metadata != nil || m.Tags != nil {
		t.Fatalf("after clearing: %s %q", m.Metadata, m.Tags)
	}
}

func TestMetadataAndTagsLimits(t *testing.T) {
	f := newFixture(t)
	keys := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = `"k` + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `": 1`
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	cases := []struct {
		name, field, want string
		meta              string
		tags              []string
	}{
		{"array", "metadata", "must be a JSON object, not an array", `[1]`, nil},
		{"string", "metadata", "must be a JSON object, not a string", `"x"`, nil},
		{"too many keys", "metadata", "has 65 keys, more than the limit of 64", keys(65), nil},
		{"nested keys count", "metadata", "has 65 keys", `{"a": ` + keys(64) + `}`, nil},
		{"too deep", "metadata", "nests deeper than the limit of 4 levels", `{"a": {"b": {"c": {"d": {}}}}}`, nil},
		{"too deep in arrays", "metadata", "nests deeper than the limit of 4 levels", `{"a": [[[[1]]]]}`, nil},
		{"too large", "metadata", "more than the limit of 4096", `{"a": "` + strings.Repeat("x", 4100) + `"}`, nil},
		{"empty key", "metadata", "has an empty key", `{"": 1}`, nil},
		{"long key", "metadata", "has a key of 129 bytes", `{"` + strings.Repeat("k", 129) + `": 1}`, nil},
		{"NUL", "metadata", "NUL character", `{"a": "x\u0000y"}`, nil},
		{"huge number", "metadata", "beyond the range of a float64", `{"a": 1e400}`, nil},
		{"number under float64", "metadata", "too close to zero for a float64", `{"a": 1e-16383}`, nil},
		{"numbers larger stored", "metadata", "as stored, more than the limit of 4096", `{"a": [` + strings.TrimSuffix(strings.Repeat("1e300,", 14), ",") + `]}`, nil},
		{"zero of a long scale", "metadata", "as stored, more than the limit of 4096", `{"a": 0e-5000}`, nil},
		// A number that underflows numeric was an error of the insert (a 500).
		{"tiny number", "metadata", "too close to zero for a float64", `{"a": {"b": 1e-20000}}`, nil},
		{"too many tags", "tags", "has 21 tags, more than the limit of 20", "", make([]string, 21)},
		{"blank tag", "tags[1]", "must not be blank", "", []string{"a", " "}},
		{"spaced tag", "tags[0]", "must not start or end with a space", "", []string{" a"}},
		{"long tag", "tags[0]", "is 65 bytes, more than the limit of 64", "", []string{strings.Repeat("t", 65)}},
		{"duplicate tag", "tags[2]", `"a" is given twice`, "", []string{"a", "b", "a"}},
		{"control tag", "tags[0]", "control characters", "", []string{"a\tb"}},
	}
	for _, c := range cases {
		var meta json.RawMessage
		if c.meta != "" {
			meta = json.RawMessage(c.meta)
		}
		_, err := f.store.Add(ctx(t), AddRequest{Owner: "u1", Content: "fact " + c.name, Metadata: meta, Tags: c.tags})
		if msg := fieldError(t, err, c.field); !strings.Contains(msg, c.want) {
			t.Errorf("%s: %q, want %q", c.name, msg, c.want)
		}
	}
	if n := f.count(`SELECT count(*) FROM %s`); n != 0 {
		t.Fatalf("%d rows written by refused adds", n)
	}
	// At the limits: accepted.
	r := f.add(AddRequest{Owner: "u1", Content: "at the limits", Metadata: json.RawMessage(`{"a": {"b": {"c": [1]}}}`),
		Tags: []string{strings.Repeat("t", 64), "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "u"}})
	if len(r.Memory.Tags) != 20 {
		t.Fatalf("tags at the limit: %q", r.Memory.Tags)
	}
	// Update is bounded the same way and changes nothing when refused.
	_, err := f.store.Update(ctx(t), UpdateRequest{Owner: "u1", ID: r.Memory.ID, Metadata: json.RawMessage(keys(65))})
	fieldError(t, err, "metadata")
	got, _ := f.store.Get(ctx(t), "u1", r.Memory.ID)
	if !sameJSON(t, got.Metadata, r.Memory.Metadata) {
		t.Fatalf("a refused update changed the metadata to %s", got.Metadata)
	}
}

// TestMetadataNumbersCountAsStored (issue 26, seventeenth review, HIGH 1):
// PostgreSQL prints a jsonb number in full, so 3.6 KB of metadata sent as
// 1e-16383 and 1e300 was read back as 6.4 MB. The size a number counts
// for (core.NumberStoredBytes) is at least what the database prints.
func TestMetadataNumbersCountAsStored(t *testing.T) {
	f := newFixture(t)
	for i, lit := range []string{"1e40", "-1.5e-30", "0e-40", "12.30e1", "100e-1", "0.5e1", "123456789.123456789", "-0", "7E+3"} {
		r := f.add(AddRequest{Owner: "u1", Content: fmt.Sprintf("number %d", i), Metadata: json.RawMessage(`{"n": ` + lit + `}`)})
		var printed string
		if err := f.admin.QueryRow(ctx(t), `SELECT (metadata->'n')::text FROM `+f.store.sql.memories+` WHERE id = $1`, r.Memory.ID).Scan(&printed); err != nil {
			t.Fatal(err)
		}
		if got := core.NumberStoredBytes(lit); got < len(printed) {
			t.Errorf("%s is stored as %q (%d bytes), counted as %d", lit, printed, len(printed), got)
		}
	}
}

// TestMetadataLoneSurrogateIsStored (issue 26, eighteenth review, LOW): a
// lone surrogate escape (\ud800), in a value or a key, made PostgreSQL
// refuse the jsonb and the add answered 500. The metadata is stored as
// decoded, with U+FFFD in its place.
func TestMetadataLoneSurrogateIsStored(t *testing.T) {
	f := newFixture(t)
	r := f.add(AddRequest{Owner: "u1", Content: "a surrogate", Metadata: json.RawMessage(`{"a": "x\ud800y", "k\udc00": 1}`)})
	if !sameJSON(t, r.Memory.Metadata, json.RawMessage(`{"a": "x\ufffdy", "k\ufffd": 1}`)) {
		t.Fatalf("stored %s", r.Memory.Metadata)
	}
}
