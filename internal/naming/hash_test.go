package naming

import (
	"strings"
	"testing"
)

func TestFit(t *testing.T) {
	long := strings.Repeat("a", 60) + "-.b"
	cases := []struct {
		name, sep, trim string
		max             int
		want            string
	}{
		{"short", "-", "-.", 10, "short"},
		{strings.Repeat("x", 10), "-", "-.", 10, strings.Repeat("x", 10)},
		// The cut part loses its trailing "-" and "."; the hash is of the whole name.
		{strings.Repeat("a", 41) + "-.bcdefghijk", "-", "-.", 52, strings.Repeat("a", 41) + "-" + ShortHash(strings.Repeat("a", 41)+"-.bcdefghijk", 4)},
		{long, "_", "", 20, long[:11] + "_" + ShortHash(long, 4)},
	}
	for _, c := range cases {
		got := Fit(c.name, c.max, c.sep, c.trim)
		if got != c.want {
			t.Errorf("Fit(%q, %d) = %q, want %q", c.name, c.max, got, c.want)
		}
		if len(got) > c.max {
			t.Errorf("Fit(%q, %d) = %q is longer than %d", c.name, c.max, got, c.max)
		}
	}
	if a, b := Fit(long+"1", 20, "_", ""), Fit(long+"2", 20, "_", ""); a == b {
		t.Errorf("two long names that differ at the end fit to the same %q", a)
	}
}

func TestHashes(t *testing.T) {
	// SHA-256("abc"), FIPS 180-2 appendix B.1.
	const abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := SHA256Hex([]byte("abc")); got != abc {
		t.Errorf("SHA256Hex(abc) = %s", got)
	}
	if got := ShortHash("abc", 4); got != abc[:8] {
		t.Errorf("ShortHash(abc, 4) = %s", got)
	}
}
