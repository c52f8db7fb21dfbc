package memory

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/engram-dev/engram/internal/memory/core"
)

// Ranges of a filter (docs/api.md "Filters"): gt, gte, lt, lte on a
// metadata key, whose bounds are numbers or RFC 3339 timestamps, and on
// the memory's createdAt and updatedAt, whose bounds are timestamps.
//
// A metadata value of another kind than the bounds (a string under a
// numeric range, a number or a string that is no RFC 3339 timestamp under
// a timestamp range, an absent key) does not match, and never makes the
// query fail: the value is only compared inside a CASE whose condition
// checked its jsonb type (and, for timestamps, that it is RFC 3339 text
// PostgreSQL can read), so nothing a tenant stored can turn a search into
// an error. The CASE answers false, never NULL, so not of a range keeps
// exactly the memories the range does not.

// rfc3339Value is the shape a metadata string must have to be compared as
// a timestamp: RFC 3339 with T or t, Z, z or an offset. It keeps out what
// PostgreSQL reads as well but means something else ("now", "infinity",
// "2026-01-01"); pg_input_is_valid then keeps out impossible dates.
const rfc3339Value = `'^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$'`

// rangeOp is one bound of a range: its JSON name, SQL operator and value.
type rangeOp struct {
	name, sql string
	value     json.RawMessage
}

func (c *Condition) hasRange() bool {
	return c.Gt != nil || c.Gte != nil || c.Lt != nil || c.Lte != nil
}

// bounds are the bounds c sets, after checking it has at most one lower
// and one upper bound.
func (b *filterBuilder) bounds(path string, c *Condition) []rangeOp {
	if c.Gt != nil && c.Gte != nil {
		b.fe.Add(path, "has both gt and gte: a range has one lower bound")
		return nil
	}
	if c.Lt != nil && c.Lte != nil {
		b.fe.Add(path, "has both lt and lte: a range has one upper bound")
		return nil
	}
	var out []rangeOp
	for _, op := range []rangeOp{{"gt", ">", c.Gt}, {"gte", ">=", c.Gte}, {"lt", "<", c.Lt}, {"lte", "<=", c.Lte}} {
		if op.value != nil {
			op.value = bytes.TrimSpace(op.value)
			out = append(out, op)
		}
	}
	return out
}

// timestamp translates a range on a timestamp column of the memory.
func (b *filterBuilder) timestamp(path string, c *Condition, column string) string {
	if !b.count(path) {
		return ""
	}
	if c.Key != "" {
		b.fe.Add(path+".key", "is for metadata conditions; %s tests the memory's own timestamp", path[strings.LastIndex(path, ".")+1:])
		return ""
	}
	if c.Eq != nil || c.In != nil || c.Exists != nil || !c.hasRange() {
		b.fe.Add(path, "must be a range: gt or gte, lt or lte, with RFC 3339 timestamps")
		return ""
	}
	ops := b.bounds(path, c)
	parts := make([]string, 0, len(ops))
	for _, op := range ops {
		t, ok := rangeTime(op.value)
		if !ok {
			b.fe.Add(path+"."+op.name, "must be an RFC 3339 timestamp such as 2026-01-01T00:00:00Z")
			return ""
		}
		parts = append(parts, column+" "+op.sql+" "+b.a.Add(t)+"::timestamptz")
	}
	if len(parts) == 0 {
		return ""
	}
	return "(" + strings.Join(parts, " AND ") + ")"
}

// metadataRange translates a range on a metadata key: numeric when its
// bounds are numbers, on timestamps when they are RFC 3339 strings (all
// its bounds of one kind).
func (b *filterBuilder) metadataRange(path string, c *Condition) string {
	ops := b.bounds(path, c)
	if len(ops) == 0 {
		return ""
	}
	k := b.a.Add(c.Key) + "::text"
	value, text := "(m.metadata -> "+k+")", "(m.metadata ->> "+k+")"
	_, numeric := rangeNumber(ops[0].value)
	parts := make([]string, 0, len(ops))
	for _, op := range ops {
		field := path + "." + op.name
		if numeric {
			n, ok := rangeNumber(op.value)
			if !ok {
				b.fe.Add(field, "must be a number like %s's bound", ops[0].name)
				return ""
			}
			parts = append(parts, value+" "+op.sql+" "+b.a.Add(n)+"::jsonb")
			continue
		}
		t, ok := rangeTime(op.value)
		if !ok {
			b.fe.Add(field, "must be a number or an RFC 3339 timestamp such as 2026-01-01T00:00:00Z (as %s's bound)", ops[0].name)
			return ""
		}
		parts = append(parts, text+"::timestamptz "+op.sql+" "+b.a.Add(t)+"::timestamptz")
	}
	cond := strings.Join(parts, " AND ")
	if numeric {
		return "(CASE WHEN jsonb_typeof(" + value + ") = 'number' THEN " + cond + " ELSE false END)"
	}
	return "(CASE WHEN jsonb_typeof(" + value + ") = 'string' AND " + text + " ~ " + rfc3339Value +
		" AND pg_input_is_valid(" + text + ", 'timestamptz') THEN " + cond + " ELSE false END)"
}

// rangeNumber is a bound as the text of a JSON number jsonb holds.
func rangeNumber(v json.RawMessage) (string, bool) {
	var x any
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return "", false
	}
	n, ok := x.(json.Number) // not a string holding digits
	if !ok || !core.Float64Number(string(n)) {
		return "", false
	}
	return n.String(), true
}

// rangeTime is a bound that is an RFC 3339 timestamp.
func rangeTime(v json.RawMessage) (time.Time, bool) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}
