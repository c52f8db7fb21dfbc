package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/engram-dev/engram/internal/memory/core"
)

// Filters of search (docs/api.md "Filters"): one JSON grammar in REST and
// MCP. A node is exactly one of
//
//	{"and": [node, ...]}  {"or": [node, ...]}  {"not": node}
//	{"metadata": {"key": K, "eq": V}}  {"metadata": {"key": K, "in": [V, ...]}}
//	{"metadata": {"key": K, "exists": true|false}}
//	{"tags": {"eq": T}}  {"tags": {"in": [T, ...]}}  {"tags": {"exists": true|false}}
//	{"metadata": {"key": K, "gt"|"gte"|"lt"|"lte": B, ...}}
//	{"createdAt"|"updatedAt": {"gt"|"gte"|"lt"|"lte": TS, ...}}
//
// K is a top-level key of the memory's metadata, V a string, number or
// boolean (compared as JSON: 1 equals 1.0), T a tag. Every value becomes a
// parameter; the SQL is built from the shape only. Metadata conditions are
// jsonb containment and key tests and tag conditions array containment
// and overlap, which the GIN indexes of migration 17 serve. Ranges are in
// filter_range.go.

// Bounds of a filter.
const (
	maxFilterDepth      = 4  // and/or/not levels above a condition
	maxFilterConditions = 32 // metadata and tags conditions in all
	maxFilterValues     = 50 // values of one in
)

// Filter is one node of a filter.
type Filter struct {
	And      []Filter   `json:"and,omitempty"`
	Or       []Filter   `json:"or,omitempty"`
	Not      *Filter    `json:"not,omitempty"`
	Metadata *Condition `json:"metadata,omitempty"`
	Tags     *Condition `json:"tags,omitempty"`
	// CreatedAt and UpdatedAt are ranges on the memory's own timestamps.
	CreatedAt *Condition `json:"createdAt,omitempty"`
	UpdatedAt *Condition `json:"updatedAt,omitempty"`
}

// Condition tests a metadata key (Key set), the tags (Key empty) or a
// timestamp of the memory: exactly one of Eq, In, Exists, or a range (a
// lower bound Gt or Gte, an upper bound Lt or Lte, or one of each).
type Condition struct {
	Key    string            `json:"key,omitempty"`
	Eq     json.RawMessage   `json:"eq,omitempty"`
	In     []json.RawMessage `json:"in,omitempty"`
	Exists *bool             `json:"exists,omitempty"`
	Gt     json.RawMessage   `json:"gt,omitempty"`
	Gte    json.RawMessage   `json:"gte,omitempty"`
	Lt     json.RawMessage   `json:"lt,omitempty"`
	Lte    json.RawMessage   `json:"lte,omitempty"`
}

// filterSQL checks f and translates it into a condition on alias m with
// its values in a; "" when f is nil or invalid (the errors are in fe,
// named filter.and[1].metadata.key and so on).
func filterSQL(fe *core.FieldErrors, a *core.Args, f *Filter) string {
	if f == nil {
		return ""
	}
	b := filterBuilder{fe: fe, a: &core.Args{List: a.List}}
	sql := b.node("filter", f, 0)
	if fe.Len() > 0 || sql == "" {
		return ""
	}
	a.List = b.a.List
	return sql
}

type filterBuilder struct {
	fe         *core.FieldErrors
	a          *core.Args
	conditions int
}

// node translates one node at depth (0 for the root).
func (b *filterBuilder) node(path string, f *Filter, depth int) string {
	set := 0
	for _, ok := range []bool{f.And != nil, f.Or != nil, f.Not != nil, f.Metadata != nil, f.Tags != nil,
		f.CreatedAt != nil, f.UpdatedAt != nil} {
		if ok {
			set++
		}
	}
	if set != 1 {
		b.fe.Add(path, "must have exactly one of and, or, not, metadata, tags, createdAt, updatedAt (has %d)", set)
		return ""
	}
	if (f.And != nil || f.Or != nil || f.Not != nil) && depth >= maxFilterDepth {
		b.fe.Add(path, "nests and, or and not deeper than the limit of %d levels", maxFilterDepth)
		return ""
	}
	switch {
	case f.And != nil:
		return b.list(path+".and", f.And, " AND ", depth)
	case f.Or != nil:
		return b.list(path+".or", f.Or, " OR ", depth)
	case f.Not != nil:
		if s := b.node(path+".not", f.Not, depth+1); s != "" {
			return "NOT " + s
		}
		return ""
	case f.Metadata != nil:
		return b.condition(path+".metadata", f.Metadata, true)
	case f.CreatedAt != nil:
		return b.timestamp(path+".createdAt", f.CreatedAt, "m.created_at")
	case f.UpdatedAt != nil:
		return b.timestamp(path+".updatedAt", f.UpdatedAt, "m.updated_at")
	default:
		return b.condition(path+".tags", f.Tags, false)
	}
}

func (b *filterBuilder) list(path string, fs []Filter, op string, depth int) string {
	if len(fs) == 0 {
		b.fe.Add(path, "must not be empty")
		return ""
	}
	parts := make([]string, 0, len(fs))
	for i := range fs {
		s := b.node(fmt.Sprintf("%s[%d]", path, i), &fs[i], depth+1)
		if s == "" {
			return ""
		}
		parts = append(parts, s)
	}
	return "(" + strings.Join(parts, op) + ")"
}

// count counts one more condition against the limit.
func (b *filterBuilder) count(path string) bool {
	if b.conditions++; b.conditions > maxFilterConditions {
		b.fe.Add(path, "is one condition more than the limit of %d in a filter", maxFilterConditions)
		return false
	}
	return true
}

// operators checks that c has exactly one of eq, in, exists or a range
// (isRange).
func (b *filterBuilder) operators(path string, c *Condition) (isRange, ok bool) {
	ops := 0
	for _, ok := range []bool{c.Eq != nil, c.In != nil, c.Exists != nil, c.hasRange()} {
		if ok {
			ops++
		}
	}
	if ops != 1 {
		b.fe.Add(path, "must have exactly one of eq, in, exists, or a range (gt or gte, lt or lte)")
		return false, false
	}
	return c.hasRange(), true
}

// condition translates a metadata (onMetadata) or tags condition.
func (b *filterBuilder) condition(path string, c *Condition, onMetadata bool) string {
	if !b.count(path) {
		return ""
	}
	isRange, ok := b.operators(path, c)
	if !ok {
		return ""
	}
	if onMetadata && !b.key(path+".key", c.Key) {
		return ""
	}
	if !onMetadata && c.Key != "" {
		b.fe.Add(path+".key", "is for metadata conditions; a tags condition tests the memory's tags")
		return ""
	}
	if isRange && !onMetadata {
		b.fe.Add(path, "has a range, which tags have not: use eq, in or exists")
		return ""
	}
	if isRange {
		return b.metadataRange(path, c)
	}
	if c.Exists != nil {
		return b.exists(c, onMetadata)
	}
	values := c.In
	if c.Eq != nil {
		values = []json.RawMessage{c.Eq}
	} else if len(values) == 0 || len(values) > maxFilterValues {
		b.fe.Add(path+".in", "must hold 1 to %d values", maxFilterValues)
		return ""
	}
	field := path + ".eq"
	if c.Eq == nil {
		field = path + ".in"
	}
	if onMetadata {
		return b.metadataValues(field, c.Key, values)
	}
	return b.tagValues(field, values)
}

func (b *filterBuilder) exists(c *Condition, onMetadata bool) string {
	not := ""
	if !*c.Exists {
		not = "NOT "
	}
	if onMetadata {
		return "(" + not + "m.metadata ? " + b.a.Add(c.Key) + "::text)"
	}
	return "(" + not + "cardinality(m.tags) > 0)"
}

// metadataValues is "the key holds one of values": a containment test
// per value ({key: value}), which the GIN index serves.
func (b *filterBuilder) metadataValues(field, key string, values []json.RawMessage) string {
	parts := make([]string, 0, len(values))
	for i, v := range values {
		x, ok := scalarValue(v)
		if !ok {
			b.fe.Add(elem(field, i), "must be a string, number or boolean")
			return ""
		}
		// Encoded anew from the decoded value: an escape jsonb refuses (a
		// lone surrogate, \ud800) was a 500 as sent (issue 26, eighteenth
		// review, LOW); decoded, it is U+FFFD, as metadata stores it.
		doc, err := json.Marshal(map[string]any{key: x})
		if err != nil {
			b.fe.Add(elem(field, i), "must be a string, number or boolean")
			return ""
		}
		parts = append(parts, "m.metadata @> "+b.a.Add(string(doc))+"::jsonb")
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// tagValues is "the memory has one of the tags values".
func (b *filterBuilder) tagValues(field string, values []json.RawMessage) string {
	tags := make([]string, 0, len(values))
	for i, v := range values {
		var t string
		if err := json.Unmarshal(v, &t); err != nil || t == "" || len(t) > core.MaxTagBytes || strings.ContainsRune(t, 0) {
			b.fe.Add(elem(field, i), "must be a tag: a string of 1 to %d bytes", core.MaxTagBytes)
			return ""
		}
		tags = append(tags, t)
	}
	return "(m.tags && " + b.a.Add(tags) + "::text[])"
}

// key checks a metadata key of a condition.
func (b *filterBuilder) key(field, k string) bool {
	if k == "" || len(k) > core.MaxMetadataKeyBytes || strings.ContainsRune(k, 0) {
		b.fe.Add(field, "must be a metadata key of 1 to %d bytes", core.MaxMetadataKeyBytes)
		return false
	}
	return true
}

// scalarValue decodes v (numbers kept as written) and reports whether it
// is a scalar a filter compares: a string without NUL (which jsonb cannot
// hold), a number metadata may hold, or a boolean.
func scalarValue(v json.RawMessage) (any, bool) {
	var x any
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return nil, false
	}
	return x, scalarOK(x)
}

// scalarOK is scalarValue's test of a decoded value.
func scalarOK(x any) bool {
	switch s := x.(type) {
	case string:
		return !strings.ContainsRune(s, 0)
	case json.Number:
		// jsonb holds numbers of PostgreSQL's numeric, which refuses
		// exponents past about ±131072 (an error, not an answer):
		// what metadata may hold is what a filter may compare
		// (core.Metadata), and no stored number is larger than its
		// limit.
		return core.NumberProblem(string(s)) == "" && core.NumberStoredBytes(string(s)) <= core.MaxMetadataBytes
	case bool:
		return true
	}
	return false
}

// elem names value i of field: field itself for an eq, field[i] for an in.
func elem(field string, i int) string {
	if strings.HasSuffix(field, ".eq") {
		return field
	}
	return fmt.Sprintf("%s[%d]", field, i)
}
