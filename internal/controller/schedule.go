package controller

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
	loc := time.UTC
	if tz != nil && *tz != "" {
		l, err := time.LoadLocation(*tz)
		if err != nil {
			return time.Time{}, fmt.Errorf("timeZone %q is not a known IANA time zone: %w", *tz, err)
		}
		loc = l
	}
	sched, err := cron.ParseStandard(schedule)
	if err != nil {
		return time.Time{}, fmt.Errorf("schedule %q: %w", schedule, err)
	}
	next := sched.Next(now.In(loc))
	if next.IsZero() {
		return time.Time{}, fmt.Errorf("schedule %q never fires", schedule)
	}
	return next, nil
}
