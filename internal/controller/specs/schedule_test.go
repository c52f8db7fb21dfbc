package specs

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

func TestNextSchedule(t *testing.T) {
	now := time.Date(2025, 3, 10, 12, 30, 0, 0, time.UTC) // a Monday
	cases := []struct {
		schedule string
		tz       *string
		want     time.Time
	}{
		{"0 3 * * *", nil, time.Date(2025, 3, 11, 3, 0, 0, 0, time.UTC)},
		{"*/15 * * * *", nil, time.Date(2025, 3, 10, 12, 45, 0, 0, time.UTC)},
		{"@daily", nil, time.Date(2025, 3, 11, 0, 0, 0, 0, time.UTC)},
		{"0 3 * * SUN", nil, time.Date(2025, 3, 16, 3, 0, 0, 0, time.UTC)},
		// 03:00 in Berlin (UTC+1 in March before DST) is 02:00 UTC.
		{"0 3 * * *", ptr.To("Europe/Berlin"), time.Date(2025, 3, 11, 2, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		got, err := NextSchedule(c.schedule, c.tz, now)
		if err != nil {
			t.Errorf("NextSchedule(%q): %v", c.schedule, err)
			continue
		}
		if !got.Equal(c.want) {
			t.Errorf("NextSchedule(%q, %v) = %s, want %s", c.schedule, ptr.Deref(c.tz, ""), got.UTC(), c.want)
		}
	}
	for _, bad := range []struct {
		schedule string
		tz       *string
	}{{"61 * * * *", nil}, {"0 3 * *", nil}, {"0 3 * * *", ptr.To("Mars/Olympus_Mons")}, {"0 0 30 2 *", nil}} {
		if _, err := NextSchedule(bad.schedule, bad.tz, now); err == nil {
			t.Errorf("NextSchedule(%q, %v) accepted", bad.schedule, ptr.Deref(bad.tz, ""))
		}
	}
}
