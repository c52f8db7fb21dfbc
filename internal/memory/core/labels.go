package core

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of a memory's metadata and tags (docs/api.md, "Metadata and
// tags"). Both are tenant and agent input: bounded here, stored through
// parameters only, and read back as data.
const (
	// MaxMetadataBytes bounds the metadata's compact JSON.
	MaxMetadataBytes = 4096
	// MaxMetadataKeys bounds the keys of all its objects together.
	MaxMetadataKeys = 64
	// MaxMetadataDepth bounds the nesting: the metadata object itself is
	// depth 1, an object or array in it depth 2, and so on.
	MaxMetadataDepth = 4
	// MaxMetadataKeyBytes bounds one key.
	MaxMetadataKeyBytes = 128
	// MaxTags bounds the tags of one memory; MaxTagBytes one tag.
	MaxTags     = 20
	MaxTagBytes = 64
)

// Metadata checks a memory's metadata (a JSON object) and returns its
// compact form; nil when absent or JSON null (an update then leaves the
// metadata as it is; {} clears it). Refused: anything but an object, more than the limits, a
// NUL character (PostgreSQL's jsonb cannot hold it) or a control
// character in a key, a number beyond float64 or reading as zero though
// it is not, and numbers that are larger stored than sent past the limit.
func (f *FieldErrors) Metadata(field string, raw json.RawMessage) json.RawMessage {
	return f.jsonObject(field, raw, objectLimits{bytes: MaxMetadataBytes, keys: MaxMetadataKeys, depth: MaxMetadataDepth})
}

// Limits of a history record's details as an import brings them (the
// engine writes a few ids, and at most the old and new metadata and tags).
const (
	MaxHistoryDetailsBytes = 16 << 10
	MaxHistoryDetailsDepth = MaxMetadataDepth + 2
)

// HistoryDetails checks the details of a history record an import brings
// as metadata is checked, within MaxHistoryDetailsBytes as stored: they
// are read back with the memory's history (issue 26, eighteenth review,
// MEDIUM 1: 19.5 KB of numbers read back as 32 MB).
func (f *FieldErrors) HistoryDetails(field string, raw json.RawMessage) json.RawMessage {
	return f.jsonObject(field, raw, objectLimits{bytes: MaxHistoryDetailsBytes, keys: MaxHistoryDetailsBytes, depth: MaxHistoryDetailsDepth})
}

// objectLimits bound a JSON object: its bytes as stored, its keys over
// all levels, its nesting.
type objectLimits struct{ bytes, keys, depth int }

// jsonObject checks raw as a JSON object within lim and returns it
// encoded anew from what was decoded (so no escape PostgreSQL's jsonb
// refuses, a lone surrogate such as \ud800, reaches it: the decoder made
// it U+FFFD), compact; nil when absent or JSON null.
func (f *FieldErrors) jsonObject(field string, raw json.RawMessage, lim objectLimits) json.RawMessage {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil
	}
	// The raw text may hold whitespace the compact form drops; past this
	// it is not parsed at all.
	if len(trimmed) > 4*lim.bytes {
		f.Add(field, "is %d bytes, more than the limit of %d", len(trimmed), lim.bytes)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		f.Add(field, "must be a JSON object")
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		f.Add(field, "must be a JSON object, not %s", jsonKind(v))
		return nil
	}
	w := metadataWalk{f: f, field: field, maxDepth: lim.depth}
	if !w.walk(obj, 1) {
		return nil
	}
	if w.keys > lim.keys {
		f.Add(field, "has %d keys, more than the limit of %d", w.keys, lim.keys)
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		f.Add(field, "must be a JSON object")
		return nil
	}
	compact := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
	if len(compact) > lim.bytes {
		f.Add(field, "is %d bytes, more than the limit of %d", len(compact), lim.bytes)
		return nil
	}
	if stored := len(compact) + w.grown; stored > lim.bytes {
		f.Add(field, "is %d bytes as stored, more than the limit of %d: PostgreSQL stores and reads back numbers in full, without an exponent (1e40 takes 41 bytes), and a space after each colon and comma", stored, lim.bytes)
		return nil
	}
	return compact
}

// metadataWalk checks the values of a metadata object and counts its keys.
type metadataWalk struct {
	f        *FieldErrors
	field    string
	maxDepth int
	keys     int
	// grown is what the object takes stored beyond its compact text: the
	// numbers in full (NumberStoredBytes), and the space jsonb prints
	// after each colon and comma.
	grown int
}

// walk checks v at depth and below; false once it added an error.
func (w *metadataWalk) walk(v any, depth int) bool {
	switch x := v.(type) {
	case map[string]any:
		if depth > w.maxDepth {
			w.f.Add(w.field, "nests deeper than the limit of %d levels", w.maxDepth)
			return false
		}
		w.keys += len(x)
		w.grown += 2 * len(x)
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if !w.key(k) || !w.walk(x[k], depth+1) {
				return false
			}
		}
	case []any:
		if depth > w.maxDepth {
			w.f.Add(w.field, "nests deeper than the limit of %d levels", w.maxDepth)
			return false
		}
		w.grown += len(x)
		for _, e := range x {
			if !w.walk(e, depth+1) {
				return false
			}
		}
	case string:
		if strings.ContainsRune(x, 0) {
			w.f.Add(w.field, "holds a string with the NUL character (\\u0000), which cannot be stored")
			return false
		}
	case json.Number:
		if msg := NumberProblem(string(x)); msg != "" {
			w.f.Add(w.field, "holds the number %.20s, which %s", string(x), msg)
			return false
		}
		// Counted at the size it is stored and read back at.
		w.grown += max(0, NumberStoredBytes(string(x))-len(x))
	}
	return true
}

// key checks one object key.
func (w *metadataWalk) key(k string) bool {
	switch {
	case k == "":
		w.f.Add(w.field, "has an empty key")
	case len(k) > MaxMetadataKeyBytes:
		w.f.Add(w.field, "has a key of %d bytes, more than the limit of %d", len(k), MaxMetadataKeyBytes)
	case strings.IndexFunc(k, unicodeControl) >= 0:
		w.f.Add(w.field, "has a key with a control character")
	default:
		return true
	}
	return false
}

func unicodeControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// Tags checks a memory's tags: at most MaxTags distinct strings of 1 to
// MaxTagBytes bytes of valid UTF-8 without control characters or
// surrounding spaces. nil (absent) and the empty list pass and mean none.
func (f *FieldErrors) Tags(field string, tags []string) {
	if len(tags) > MaxTags {
		f.Add(field, "has %d tags, more than the limit of %d", len(tags), MaxTags)
		return
	}
	for i, t := range tags {
		name := field + "[" + strconv.Itoa(i) + "]"
		switch {
		case strings.TrimSpace(t) == "":
			f.Add(name, "must not be blank")
		case t != strings.TrimSpace(t):
			f.Add(name, "must not start or end with a space")
		case !utf8.ValidString(t):
			f.Add(name, "must be valid UTF-8")
		case len(t) > MaxTagBytes:
			f.Add(name, "is %d bytes, more than the limit of %d", len(t), MaxTagBytes)
		case strings.IndexFunc(t, unicodeControl) >= 0:
			f.Add(name, "must not hold control characters")
		case slices.Index(tags, t) < i:
			f.Add(name, "%q is given twice: tags are a set", t)
		}
	}
}

// Float64Number reports whether the JSON number n is within float64: not
// infinite, and not so small that it underflows to 0 — PostgreSQL's
// numeric refuses exponents below about -16383, so 1e-20000 in a jsonb
// value was an error of the insert (a 500), not a refusal naming the field.
//
// It also keeps the number's stored form within the size metadata may
// hold: 0e-20000 reads as 0 but PostgreSQL's numeric keeps its scale and
// refuses it (issue 26, twenty-first review, LOW 1).
func Float64Number(n string) bool {
	return NumberProblem(n) == "" && NumberStoredBytes(n) <= MaxMetadataBytes
}
