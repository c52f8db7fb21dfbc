package specs

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// NextSchedule is the first time after now that schedule fires in time zone
// tz (nil: UTC, the usual time zone of kube-controller-manager). It parses
// with robfig/cron's standard parser, the one Kubernetes' CronJob controller
// uses, so the operator and the cluster agree on what a schedule means.
func NextSchedule(schedule string, tz *string, now time.Time) (time.Time, error) {
	sched, loc, err := parseSchedule(schedule, tz)
	if err != nil {
		return time.Time{}, err
	}
	next := sched.Next(now.In(loc))
	if next.IsZero() {
		return time.Time{}, fmt.Errorf("schedule %q never fires", schedule)
	}
	return next, nil
}

func parseSchedule(schedule string, tz *string) (cron.Schedule, *time.Location, error) {
	loc := time.UTC
	if tz != nil && *tz != "" {
		l, err := time.LoadLocation(*tz)
		if err != nil {
			return nil, nil, fmt.Errorf("timeZone %q is not a known IANA time zone: %w", *tz, err)
		}
		loc = l
	}
	sched, err := cron.ParseStandard(schedule)
	if err != nil {
		return nil, nil, fmt.Errorf("schedule %q: %w", schedule, err)
	}
	return sched, loc, nil
}

// intervalSamples is how many consecutive runs ShortestInterval looks at:
// enough to meet the short gaps of the usual irregular schedules (weekdays
// only, a few days of the month) without costing a reconcile anything.
const intervalSamples = 64

// intervalReference is where ShortestInterval starts counting: a fixed
// time, so the result (which goes into the CronJob) never changes from one
// reconcile to the next.
var intervalReference = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// ShortestInterval is the shortest time between two consecutive runs of
// schedule in time zone tz among the first runs after a fixed date. It is
// at least a minute (the cron format's resolution).
func ShortestInterval(schedule string, tz *string) (time.Duration, error) {
	sched, loc, err := parseSchedule(schedule, tz)
	if err != nil {
		return 0, err
	}
	prev := sched.Next(intervalReference.In(loc))
	shortest := time.Duration(0)
	for range intervalSamples {
		next := sched.Next(prev)
		if next.IsZero() {
			break
		}
		if gap := next.Sub(prev); shortest == 0 || gap < shortest {
			shortest = gap
		}
		prev = next
	}
	if shortest == 0 {
		return 0, fmt.Errorf("schedule %q fires less than twice in five years", schedule)
	}
	return max(shortest, time.Minute), nil
}
