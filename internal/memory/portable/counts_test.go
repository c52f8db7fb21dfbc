package portable

import "testing"

// TestCounts: the total, the text kubectl engram and the demo print, and
// the sum of several import answers.
func TestCounts(t *testing.T) {
	c := Counts{KindMessage: 1506, KindMemory: 2003, KindEpisode: 0}
	if got := c.Total(); got != 3509 {
		t.Errorf("Total = %d, want 3509", got)
	}
	if got, want := c.String(), "memory 2003, message 1506"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := (Counts{KindMemory: 0}).String(); got != "nothing" {
		t.Errorf("String of zeros = %q, want nothing", got)
	}
	if got := Counts(nil).String(); got != "nothing" {
		t.Errorf("String of nil = %q, want nothing", got)
	}

	var sum ImportResult
	sum.Add(&ImportResult{Lines: 10, Parts: 1, Owners: 2, Embedded: 3, Records: Counts{KindMemory: 5},
		Inserted: Counts{KindMemory: 4}, Existing: Counts{KindMemory: 1}})
	sum.Add(&ImportResult{Lines: 7, Parts: 1, Owners: 1, Embedded: 2, Records: Counts{KindMemory: 2, KindHistory: 1},
		Inserted: Counts{KindHistory: 1}, Existing: Counts{KindMemory: 2}})
	if sum.Lines != 17 || sum.Parts != 2 || sum.Owners != 3 || sum.Embedded != 5 {
		t.Errorf("sum %+v", sum)
	}
	for _, c := range []struct {
		name      string
		got, want Counts
	}{
		{"records", sum.Records, Counts{KindMemory: 7, KindHistory: 1}},
		{"inserted", sum.Inserted, Counts{KindMemory: 4, KindHistory: 1}},
		{"existing", sum.Existing, Counts{KindMemory: 3}},
	} {
		if c.got.String() != c.want.String() {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}
