package server

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/engram-dev/engram/internal/memory"
)

// query reads URL query parameters strictly, like the JSON bodies: unknown
// or repeated parameters and invalid values are validation errors, so a
// misspelt filter ("categroy=") never silently lists everything.
type query struct {
	values url.Values
	errs   []memory.FieldError
}

func newQuery(u *url.URL, allowed ...string) *query {
	q := &query{}
	v, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		q.errs = append(q.errs, fieldErr("query", "the query string is malformed: "+err.Error()))
		return q
	}
	q.values = v
	names := make([]string, 0, len(v))
	for k := range v {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		switch {
		case k == "": // "?=x": an error with an empty field would name nothing
			q.errs = append(q.errs, fieldErr("query", "a parameter has no name (\"=value\")"))
		case !utf8.ValidString(k):
			q.errs = append(q.errs, fieldErr("query", "parameter names must be valid UTF-8"))
		case !slices.Contains(allowed, k):
			q.errs = append(q.errs, fieldErr(k, unknownParamMessage(allowed)))
		case len(v[k]) > 1:
			q.errs = append(q.errs, fieldErr(k, "given more than once"))
		case !utf8.ValidString(v[k][0]):
			q.errs = append(q.errs, fieldErr(k, "must be valid UTF-8"))
		}
	}
	return q
}

// unknownParamMessage names the parameters the route does take.
func unknownParamMessage(allowed []string) string {
	if len(allowed) == 0 {
		return "unknown query parameter: this route takes none"
	}
	return "unknown query parameter; this route takes " + strings.Join(allowed, ", ")
}

func (q *query) str(name string) string { return q.values.Get(name) }

func (q *query) boolean(name string) bool {
	return parsed(q, name, strconv.ParseBool, "must be true or false")
}

func (q *query) integer(name string) int {
	return parsed(q, name, strconv.Atoi, "must be an integer within range")
}

// integer64 reads an int64 parameter (message seq numbers).
func (q *query) integer64(name string) int64 {
	return parsed(q, name, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }, "must be an integer within range")
}

// parsed reads parameter name with parse: the zero value when absent; a
// value that does not parse adds a field error saying what it must be (the
// request then fails with it, whatever is returned).
func parsed[T any](q *query, name string, parse func(string) (T, error), must string) T {
	var zero T
	s := q.values.Get(name)
	if s == "" {
		return zero
	}
	v, err := parse(s)
	if err != nil {
		q.errs = append(q.errs, fieldErr(name, must))
	}
	return v
}

// optBoolean reads a filter that is off when absent: nil, else true or false.
func (q *query) optBoolean(name string) *bool {
	if !q.values.Has(name) {
		return nil
	}
	b := q.boolean(name)
	if q.values.Get(name) == "" {
		q.errs = append(q.errs, fieldErr(name, "must be true or false"))
	}
	return &b
}

// set reads a comma-separated list of values out of allowed ("a,b"); an
// unknown value is an error naming the allowed ones.
func (q *query) set(name string, allowed ...string) map[string]bool {
	s := q.values.Get(name)
	if s == "" {
		return nil
	}
	out := map[string]bool{}
	for _, v := range strings.Split(s, ",") {
		v = strings.TrimSpace(v)
		if !slices.Contains(allowed, v) {
			q.errs = append(q.errs, fieldErr(name, fmt.Sprintf("%q is not one of %s (comma-separated)", v, strings.Join(allowed, ", "))))
			continue
		}
		out[v] = true
	}
	return out
}

// problem returns the collected errors as one 422, or nil.
func (q *query) problem() *Problem {
	if len(q.errs) == 0 {
		return nil
	}
	return validationProblem(q.errs...)
}

// err is problem as an error, for operations.
func (q *query) err() error {
	if p := q.problem(); p != nil {
		return problemError{p}
	}
	return nil
}

// param is a query parameter a route declares, with its description:
// the route table is the one source, and TestQueryParamsMatchOpenAPI
// checks that openapi.yaml documents the same parameters with the same
// descriptions.
type param struct{ name, desc string }

// params are the query parameters of a route.
type params []param

func (p params) names() []string {
	out := make([]string, len(p))
	for i, x := range p {
		out[i] = x.name
	}
	return out
}
