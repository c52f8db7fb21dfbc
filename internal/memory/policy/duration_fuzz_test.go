package policy

import (
	"encoding/json"
	"testing"
	"time"
)

// The seed corpora are in testdata/fuzz/<FuzzName>/; plain go test runs
// them, make fuzz explores from them.

// FuzzParseDuration: any text either fails with a message or parses to a
// duration that round-trips through String and JSON (the operator writes
// policies with String, the service reads them with ParseDuration).
func FuzzParseDuration(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("ParseDuration(%q): empty error", s)
			}
			return
		}
		if d < 0 || d > MaxDuration {
			t.Fatalf("ParseDuration(%q) = %d, outside [0, MaxDuration]", s, d)
		}
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("ParseDuration(%q) = %s; reparsing that gives %v, %v", s, d, time.Duration(back), err)
		}
		js, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var viaJSON Duration
		if err := json.Unmarshal(js, &viaJSON); err != nil || viaJSON != d {
			t.Fatalf("JSON round trip of %s (%s): %v, %v", d, js, time.Duration(viaJSON), err)
		}
	})
}

// FuzzDurationString: every duration of whole seconds up to MaxDuration —
// what ParseDuration and the operator's halfLife default (ttl/2) produce —
// is written by String in a form ParseDuration reads back exactly. A
// config the operator writes must never be one the service cannot load.
func FuzzDurationString(f *testing.F) {
	f.Fuzz(func(t *testing.T, secs int64) {
		maxSecs := int64(MaxDuration / Duration(time.Second))
		if secs < 0 {
			secs = -(secs + 1)
		}
		secs %= maxSecs + 1
		d := Duration(time.Duration(secs) * time.Second)
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("%d seconds is written %q, read back as %v, %v", secs, d.String(), time.Duration(back), err)
		}
	})
}
