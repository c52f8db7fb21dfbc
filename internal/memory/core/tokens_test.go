package core

import (
	"strings"
	"testing"
)

func TestCountTokens(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0},
		{"a", 1},
		{"abcd", 1},
		{"abcde", 2},
		{strings.Repeat("x", 400), 100},
		{"你好", 2},                   // 2 Han / 1.5 = 1.33 -> 2
		{"你好世", 2},                  // 3 / 1.5 = 2
		{"こんにちは", 4},                // 5 Hiragana / 1.5 = 3.33 -> 4
		{"カタカナ", 3},                 // 4 Katakana -> 2.67 -> 3
		{"안녕하세요", 4},                // 5 Hangul -> 4
		{"ab你好", 2},                 // 2/4 + 2/1.5 = 1.83 -> 2
		{"é", 1},                    // 2 bytes of non-CJK -> 0.5 -> 1
		{strings.Repeat("é", 4), 2}, // 8 bytes -> 2
		{"。", 1},                    // CJK punctuation is not a CJK script: 3 bytes -> 1
	} {
		if got := CountTokens(tc.in); got != tc.want {
			t.Errorf("CountTokens(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
	// Sub-additivity: the count of a text never exceeds the sum of its parts'
	// (so budgets summed per item bound the whole).
	parts := []string{"abc", "你", "好的", "x", "ééé", "こんにちは世界"}
	sum := 0
	for _, p := range parts {
		sum += CountTokens(p)
	}
	if whole := CountTokens(strings.Join(parts, "")); whole > sum {
		t.Errorf("whole %d > sum of parts %d", whole, sum)
	}
}
