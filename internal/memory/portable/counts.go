package portable

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Counts are records by kind: a header's or a trailer's counts, what an
// import read, inserted or found there already.
type Counts map[string]int64

// Total is the number of records of every kind.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// String is "memory 2003, message 1506, ..." in the order of the kinds'
// names, kinds without records left out; "nothing" when none has any.
func (c Counts) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		if c[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// Add adds o's records to c's.
func (c Counts) Add(o Counts) {
	for k, v := range o {
		c[k] += v
	}
}

// Add sums the answer of one more import request into r (a client that
// sends a file in several requests reports their sum). Nil counts of r
// are made.
func (r *ImportResult) Add(o *ImportResult) {
	r.Lines += o.Lines
	r.Parts += o.Parts
	r.Owners += o.Owners
	r.Embedded += o.Embedded
	for _, m := range []struct {
		sum *Counts
		add Counts
	}{{&r.Records, o.Records}, {&r.Inserted, o.Inserted}, {&r.Existing, o.Existing}} {
		if *m.sum == nil {
			*m.sum = Counts{}
		}
		m.sum.Add(m.add)
	}
}
