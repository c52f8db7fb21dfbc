package core

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// The appenders below write what encoding/json's Marshal writes for a
// string, a float64 and a time.Time, byte for byte (HTML characters
// escaped, as the REST encoder does), without reflection and without the
// validation pass encoding/json runs over every Marshaler's output (issue
// 32: a search answer's JSON was ~15 % of the service's CPU per search).
// Where Marshal would fail (a NaN, a year past 9999), they say so (false),
// and the caller falls back to Marshal, which reports the error itself.
// TestJSONAppendersMatchMarshal holds them to Marshal's output.

const hexDigits = "0123456789abcdef"

// jsonSafe marks the ASCII bytes written as they are in a JSON string
// (encoding/json's htmlSafeSet: printable, not '"', '\\', '<', '>', '&').
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// AppendJSONString appends s as a JSON string.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if jsonSafe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendJSONFloat appends f as encoding/json writes a float64 (false: NaN
// or an infinity, which JSON cannot hold).
func AppendJSONFloat(dst []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, false
	}
	abs, format := math.Abs(f), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 -> e-9, as encoding/json does.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst, true
}

// AppendJSONTime appends t as its MarshalJSON writes it (RFC 3339 with
// nanoseconds, quoted); false for what MarshalJSON refuses (a year outside
// 0..9999, a zone offset of 24 hours or more) or cannot write exactly
// (an offset with seconds).
func AppendJSONTime(dst []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return dst, false
	}
	if _, off := t.Zone(); off%60 != 0 || off <= -24*3600 || off >= 24*3600 {
		return dst, false
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), true
}

// AppendJSONRaw appends a json.RawMessage as Marshal writes it (compacted,
// HTML characters escaped; false: not valid JSON).
func AppendJSONRaw(dst []byte, raw json.RawMessage) ([]byte, bool) {
	js, err := json.Marshal(raw)
	if err != nil {
		return dst, false
	}
	return append(dst, js...), true
}

// AppendJSONOptString appends the field name (`,"x":`) and s, nothing when
// s is empty (omitempty).
func AppendJSONOptString(dst []byte, name, s string) []byte {
	if s == "" {
		return dst
	}
	return AppendJSONString(append(dst, name...), s)
}

// AppendJSONOptStrings appends the field name and vs as an array, nothing
// when vs is empty (omitempty).
func AppendJSONOptStrings(dst []byte, name string, vs []string) []byte {
	if len(vs) == 0 {
		return dst
	}
	dst = append(append(dst, name...), '[')
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJSONString(dst, v)
	}
	return append(dst, ']')
}

// AppendJSONTimeField appends the field name and t (AppendJSONTime),
// setting *ok to false where Marshal would refuse t.
func AppendJSONTimeField(dst []byte, name string, t time.Time, ok *bool) []byte {
	dst, fine := AppendJSONTime(append(dst, name...), t)
	if !fine {
		*ok = false
	}
	return dst
}

// AppendJSONArray appends xs as a JSON array, each element written by f,
// and null for a nil slice (as Marshal writes them).
func AppendJSONArray[T any](dst []byte, xs []T, f func([]byte, *T) []byte) []byte {
	if xs == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i := range xs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = f(dst, &xs[i])
	}
	return append(dst, ']')
}

// AppendJSONStringField appends the field name (`,"x":`) and s.
func AppendJSONStringField(dst []byte, name, s string) []byte {
	return AppendJSONString(append(dst, name...), s)
}

// AppendJSONIntField appends the field name and n.
func AppendJSONIntField(dst []byte, name string, n int64) []byte {
	return strconv.AppendInt(append(dst, name...), n, 10)
}
