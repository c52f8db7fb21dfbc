package extractive

import (
	"slices"
	"testing"
)

func TestSplitSentences(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want []string
	}{
		{"marks and spaces", "I live in Lisbon. Do you? Yes!", []string{"I live in Lisbon.", "Do you?", "Yes!"}},
		{"newlines end sentences", "first line\nsecond line\n\nthird", []string{"first line", "second line", "third"}},
		{"abbreviations", "Dr. Silva meets Mr. Costa at 5 p.m. today. Then we leave.", []string{"Dr. Silva meets Mr. Costa at 5 p.m. today.", "Then we leave."}},
		{"e.g. and initials", "Book a city, e.g. Porto or Braga. J. R. Tolkien wrote it.", []string{"Book a city, e.g. Porto or Braga.", "J. R. Tolkien wrote it."}},
		{"numbers and addresses", "It costs 3.5 euros at example.com today. Fine.", []string{"It costs 3.5 euros at example.com today.", "Fine."}},
		{"a lower-case word goes on", "Wait... what happened? Nothing.", []string{"Wait... what happened?", "Nothing."}},
		{"closing quotes stay", `She said "take the train." Then she left.`, []string{`She said "take the train."`, "Then she left."}},
		{"CJK marks need no space", "我住在东京。我喜欢猫！你呢？", []string{"我住在东京。", "我喜欢猫！", "你呢？"}},
		{"Japanese and brackets", "「東京へ行く。」明日です。", []string{"「東京へ行く。」", "明日です。"}},
		{"Cyrillic and Greek", "Я живу в Москве. Καλημέρα! Ok.", []string{"Я живу в Москве.", "Καλημέρα!", "Ok."}},
		{"Arabic and Devanagari", "أنا أعيش في القاهرة. هل تحب الشاي؟ मैं दिल्ली में रहता हूँ। ठीक है।",
			[]string{"أنا أعيش في القاهرة.", "هل تحب الشاي؟", "मैं दिल्ली में रहता हूँ।", "ठीक है।"}},
		{"no mark at the end", "just words without an end", []string{"just words without an end"}},
		{"only spaces", "  \n ", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := splitSentences(tc.text); !slices.Equal(got, tc.want) {
				t.Errorf("split %q\n got %q\nwant %q", tc.text, got, tc.want)
			}
		})
	}
}
