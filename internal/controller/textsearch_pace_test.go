package controller

import (
	"testing"
	"time"
)

// TestDecideTextSearch: a switch of the text search configuration within
// the minimum interval after the previous one waits for the rest of it;
// the first pass, a kept configuration and a switch past the interval do
// not (a LOW of issue 26: a policy flipping its configuration made the
// operator refill and rebuild the tenant's text index on every flip).
func TestDecideTextSearch(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	const interval = 5 * time.Minute
	german := textPace{applied: "german", switched: now.Add(-2 * time.Minute)}
	for _, c := range []struct {
		name     string
		want     string
		pace     textPace
		use      string
		deferred time.Duration
	}{
		{"first pass of this process", "french", textPace{}, "french", 0},
		{"applied but never switched", "french", textPace{applied: "english"}, "french", 0},
		{"policy keeps the configuration", "german", german, "german", 0},
		{"no configuration (policy missing)", "", german, "", 0},
		{"switch within the interval", "french", german, "german", 3 * time.Minute},
		{"switch back within the interval", "english", german, "german", 3 * time.Minute},
		{"switch past the interval", "french", textPace{applied: "german", switched: now.Add(-interval)}, "french", 0},
	} {
		use, deferred := decideTextSearch(c.want, c.pace, now, interval)
		if use != c.use || deferred != c.deferred {
			t.Errorf("%s: decideTextSearch(%q) = %q, %s; want %q, %s", c.name, c.want, use, deferred, c.use, c.deferred)
		}
	}
}

// TestTextPaceRecordsSwitches: a pass that switched records when; one that
// kept the configuration keeps the previous switch's time; a deferral
// announced for the configuration now applied is forgotten.
func TestTextPaceRecordsSwitches(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	p := textPace{}.paced("german", true, t0)
	if p.applied != "german" || !p.switched.Equal(t0) {
		t.Fatalf("after a switch: %+v", p)
	}
	p.announced = "french"
	p = p.paced("german", false, t0.Add(time.Minute))
	if !p.switched.Equal(t0) || p.announced != "french" {
		t.Fatalf("a pass that kept german changed the pace: %+v", p)
	}
	p = p.paced("french", true, t0.Add(6*time.Minute))
	if p.applied != "french" || !p.switched.Equal(t0.Add(6*time.Minute)) || p.announced != "" {
		t.Fatalf("after the deferred switch: %+v", p)
	}
	if q := p.paced("", false, t0.Add(7*time.Minute)); q != p {
		t.Fatalf("a pass without a configuration changed the pace: %+v", q)
	}
}

// TestTextPaceCountsAnAttempt: a pass that sets out to switch counts as a
// switch from its start, so a pass that fails after switching still paces
// the next flip (the hostile review of this session, MEDIUM 4).
func TestTextPaceCountsAnAttempt(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	p := textPace{applied: "english"}.attempted("german", t0)
	if use, wait := decideTextSearch("french", p, t0.Add(time.Minute), 5*time.Minute); use != "german" || wait != 4*time.Minute {
		t.Fatalf("a flip one minute after a failed switch: %q, %s; want german, 4m", use, wait)
	}
	if q := p.attempted("german", t0.Add(time.Minute)); q != p {
		t.Fatalf("a retry of the same switch moved the pace: %+v", q)
	}
	if q := (textPace{}).attempted("german", t0); q != (textPace{}) {
		t.Fatalf("the first pass of this process counted as a switch: %+v", q)
	}
}
