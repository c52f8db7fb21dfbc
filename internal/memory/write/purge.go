package write

import (
	"fmt"
	"time"
)

// The purge job deletes inactive rows after retention.purgeInactiveAfter;
// add's lookup leaves out the rows it is about to delete (PurgeGuard), so
// the two never wait on each other's row locks. The façade's purge job
// runs these conditions too.

// PurgeDueSQL is the condition (on alias m) of the rows purge deletes, or
// with a margin, of those it will delete within margin.
func (s *Store) PurgeDueSQL(margin time.Duration) string {
	return `NOT m.active AND m.deactivated_at < ` + s.KeptSinceSQL(margin)
}

// KeptSinceSQL is the earliest deactivation time (SQL) of the inactive rows
// purge will not delete within margin: an inactive row deactivated at or
// after it is not PurgeDueSQL(margin); one without a deactivation time is
// neither (purge never deletes it; add's lookup never compares it).
func (s *Store) KeptSinceSQL(margin time.Duration) string {
	retention := time.Duration(s.core.Policy.Retention.PurgeInactiveAfter) - margin
	return fmt.Sprintf(`now() - make_interval(secs => %f)`, retention.Seconds())
}

// PurgeGuard is how long before it is due a row stops being a dedup
// Neighbour (nearest): longer than any add transaction (which reads now()
// at its start), so a purge batch never holds a row an add waits for; half
// the retention when that is shorter.
func (s *Store) PurgeGuard() time.Duration {
	return min(time.Hour, time.Duration(s.core.Policy.Retention.PurgeInactiveAfter)/2)
}
