package core

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// EncodeCursor makes an opaque cursor from the last row of a page.
func EncodeCursor(t time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(t.UnixMicro(), 10) + "/" + id))
}

// DecodeTimeCursor reads a cursor of EncodeCursor whose id validID accepts
// (memory ids, session ids).
func DecodeTimeCursor(c string, validID func(string) bool) (time.Time, string, error) {
	if c == "" {
		return time.Time{}, "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", err
	}
	ts, id, ok := strings.Cut(string(raw), "/")
	us, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil || !validID(id) {
		return time.Time{}, "", errors.New("malformed cursor")
	}
	if us < minTimestampMicros {
		return time.Time{}, "", errors.New("malformed cursor: its time is before PostgreSQL's first timestamp")
	}
	return time.UnixMicro(us).UTC(), id, nil
}

// minTimestampMicros is PostgreSQL's first timestamptz (4714-11-24 00:00
// UTC BC) in microseconds since 1970: a cursor before it made the query
// fail with "timestamp out of range", a 500 (issue 26's ninth review, L2).
// Its last (294276 AD) is past what int64 microseconds since 1970 reach.
const minTimestampMicros = -210866803200000000

// EncodeSerialCursor makes an opaque cursor from the id of a page's last
// row, in a list ordered by a serial id.
func EncodeSerialCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(id, 10)))
}

// DecodeSerialCursor is the id a cursor of EncodeSerialCursor names; 0
// for no cursor.
func DecodeSerialCursor(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || id < 1 {
		return 0, errors.New("malformed cursor")
	}
	return id, nil
}
