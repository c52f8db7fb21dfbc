package server

import (
	"bytes"
	"encoding/json"

	"github.com/engram-dev/engram/internal/memory"
)

// filter reads a query parameter holding a filter as JSON (list's filter=,
// the grammar of search's body), strictly like a body: unknown fields are
// errors naming the parameter. nil when absent.
func (q *query) filter(name string) *memory.Filter {
	s := q.values.Get(name)
	if s == "" {
		return nil
	}
	var f memory.Filter
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		q.errs = append(q.errs, fieldErr(name, "must be a filter as JSON: "+err.Error()))
		return nil
	}
	return &f
}
