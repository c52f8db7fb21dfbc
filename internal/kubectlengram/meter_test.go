package kubectlengram

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMeterLine: a transfer's progress is a bar with a percentage when the
// total is known, the count alone when it is not (issue 29: a progress bar
// on a terminal).
func TestMeterLine(t *testing.T) {
	for _, c := range []struct {
		done, total int64
		want        string
	}{
		{0, 10000, "[..............................]   0%  0 of 10,000 records"},
		{3000, 10000, "[#########.....................]  30%  3,000 of 10,000 records"},
		{10000, 10000, "[##############################] 100%  10,000 of 10,000 records"},
		{10250, 10000, "[##############################] 100%  10,250 of 10,000 records"},
		{1234567, 0, "1,234,567 records"},
	} {
		if got := meterLine(c.done, c.total, "records"); got != c.want {
			t.Errorf("meterLine(%d, %d) = %q, want %q", c.done, c.total, got, c.want)
		}
	}
}

// TestInputSize: an import knows the size of a file, not of a pipe.
func TestInputSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 1234)), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := inputSize(f); got != 1234 {
		t.Errorf("inputSize(file) = %d, want 1234", got)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if got := inputSize(r); got != 0 {
		t.Errorf("inputSize(pipe) = %d, want 0 (unknown)", got)
	}
	if got := inputSize(strings.NewReader("abc")); got != 0 {
		t.Errorf("inputSize(reader) = %d, want 0", got)
	}
}
