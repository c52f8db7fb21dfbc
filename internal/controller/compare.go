package controller

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// The operator skips an apply when the live object already holds every field
// it would set. Both sides are first normalised through JSON (so typed,
// cached and applied objects compare alike: numbers as float64, quantities
// and times as their canonical strings, unset optional fields absent), then
// compared as "desired is a subset of live": fields that the API server
// defaulted or that other managers own do not count as differences.

// toJSONMap normalises an object through JSON.
func toJSONMap(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", obj, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", obj, err)
	}
	return m, nil
}

// pruneNulls removes null values at any depth (such as the creationTimestamp:
// null of a typed object that was never stored), which would otherwise be
// applied as "delete this field".
func pruneNulls(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			t[k] = pruneNulls(e)
		}
	case []any:
		for i, e := range t {
			t[i] = pruneNulls(e)
		}
	}
	return v
}

// isSubset reports whether every field set in desired has the same value in
// live. Maps compare key by key; lists whose items all have a "name" match
// items by name (containers, env, ports, volumes: other managers may add
// their own); other lists must match item by item; scalars must be equal.
// An empty map, list or string in desired matches an absent field.
func isSubset(desired, live any) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return live == nil && len(d) == 0
		}
		for k, dv := range d {
			lv, present := l[k]
			if !present {
				if isEmptyValue(dv) {
					continue
				}
				return false
			}
			if !isSubset(dv, lv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return live == nil && len(d) == 0
		}
		if byName, ok := indexByName(l); ok && allNamed(d) {
			for _, item := range d {
				name := item.(map[string]any)["name"]
				if !isSubset(item, byName[name.(string)]) {
					return false
				}
			}
			return true
		}
		if len(d) != len(l) {
			return false
		}
		for i := range d {
			if !isSubset(d[i], l[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(desired, live)
	}
}

func isEmptyValue(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	case string:
		return t == ""
	}
	return false
}

// allNamed reports whether every item is a map with a string "name".
func allNamed(items []any) bool {
	if len(items) == 0 {
		return false
	}
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["name"].(string); !ok {
			return false
		}
	}
	return true
}

// indexByName maps the items of a named list by name; ok is false when the
// list is not a named list (then it is compared item by item).
func indexByName(items []any) (map[string]any, bool) {
	if !allNamed(items) {
		return nil, len(items) == 0
	}
	out := make(map[string]any, len(items))
	for _, it := range items {
		out[it.(map[string]any)["name"].(string)] = it
	}
	return out, true
}
