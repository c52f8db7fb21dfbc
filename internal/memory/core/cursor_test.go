package core

import (
	"encoding/base64"
	"math"
	"strconv"
	"testing"
)

// TestTimeCursorOutsidePostgresRangeIsRefused (issue 26's ninth review,
// L2): a cursor is base64("<µs since 1970>/<id>"), and one before
// PostgreSQL's first timestamptz (4714-11-24 BC) made List and
// ListSessions fail with "timestamp out of range", which the API answered
// 500. It is a cursor field error now; PostgreSQL's last timestamp is past
// what int64 µs reach, so every later time is kept.
func TestTimeCursorOutsidePostgresRangeIsRefused(t *testing.T) {
	cursor := func(us int64) string {
		return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(us, 10) + "/s1"))
	}
	for _, us := range []int64{minTimestampMicros, 0, math.MaxInt64} {
		at, id, err := DecodeTimeCursor(cursor(us), ValidScopeID)
		if err != nil || at.UnixMicro() != us || id != "s1" {
			t.Errorf("cursor of %d µs: %v, %q, %v; want it read", us, at, id, err)
		}
	}
	for _, us := range []int64{minTimestampMicros - 1, -211813488000000000, math.MinInt64} {
		_, _, err := DecodeTimeCursor(cursor(us), ValidScopeID)
		fe := &FieldErrors{}
		fe.Cursor(err)
		v, ok := IsValidation(fe.Err())
		if !ok || len(v.Fields) != 1 || v.Fields[0].Field != "cursor" {
			t.Errorf("cursor of %d µs: %v; want a cursor field error", us, err)
		}
	}
}
