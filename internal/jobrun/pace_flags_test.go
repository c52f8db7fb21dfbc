package jobrun

import (
	"io"
	"strings"
	"testing"
)

// The pacing flags reach Options with their default, and values outside
// their range are refused before anything runs.
func TestPaceFlags(t *testing.T) {
	env := func(string) string { return "" }
	o, err := ParseFlags(nil, env, io.Discard)
	if err != nil || o.Duty != DefaultDuty || o.RowsPerSecond != 0 {
		t.Fatalf("defaults: %+v, %v; want duty %g, no budget", o, err, DefaultDuty)
	}
	o, err = ParseFlags([]string{"--duty=0.25", "--rows-per-second=5000"}, env, io.Discard)
	if err != nil || o.Duty != 0.25 || o.RowsPerSecond != 5000 {
		t.Fatalf("set: %+v, %v", o, err)
	}
	for _, bad := range []string{"--duty=0", "--duty=1.5", "--duty=NaN", "--duty=0.01", "--rows-per-second=-1", "--rows-per-second=0.5"} {
		_, err := ParseFlags([]string{bad}, env, io.Discard)
		if err == nil || !strings.Contains(err.Error(), strings.SplitN(bad[2:], "=", 2)[0]) {
			t.Errorf("%s: err %v, want it refused by name", bad, err)
		}
	}
}
