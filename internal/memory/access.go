package memory

import (
	"context"
	"slices"
	"sync"
	"time"
)

// accessRecorder counts the accesses of searched and rendered memories and
// their last access (table memory_access) in the background, batched, best effort: a search never
// waits for a write, when the buffer is full the statistic is dropped rather
// than slowing reads down, and one memory is rewritten at most once per
// accessThrottle (see duePending).
type accessRecorder struct {
	s       *Store
	ids     chan string
	done    chan struct{}
	stopped sync.WaitGroup
	once    sync.Once
	// flushNow asks the loop to write what it has (tests and Close).
	flushNow chan chan struct{}
}

const (
	accessBuffer     = 8192
	accessInterval   = 2 * time.Second
	accessThrottle   = time.Minute
	accessMaxPending = 100_000
)

func newAccessRecorder(s *Store) *accessRecorder {
	a := &accessRecorder{s: s, ids: make(chan string, accessBuffer), done: make(chan struct{}), flushNow: make(chan chan struct{})}
	a.stopped.Add(1)
	go a.loop()
	return a
}

// record queues ids; it never blocks.
func (a *accessRecorder) record(ids ...string) {
	for _, id := range ids {
		select {
		case a.ids <- id:
		default:
			return // buffer full: drop, stats are best effort
		}
	}
}

func (a *accessRecorder) loop() {
	defer a.stopped.Done()
	pending := map[string]int{}       // accesses not yet written, by id
	written := map[string]time.Time{} // when each id was last written
	tick := time.NewTicker(accessInterval)
	defer tick.Stop()
	drain := func() {
		for {
			select {
			case id := <-a.ids:
				pending[id]++
			default:
				return
			}
		}
	}
	for {
		select {
		case id := <-a.ids:
			pending[id]++
		case <-tick.C:
			a.write(duePending(pending, written, time.Now()))
		case ack := <-a.flushNow:
			drain()
			a.write(pending)
			pending = map[string]int{}
			close(ack)
		case <-a.done:
			drain()
			a.write(pending)
			return
		}
	}
}

// duePending moves out of pending the ids not written within
// accessThrottle and records them as written now. A memory that is hit on
// every search is thus rewritten at most once a minute (its count adds up
// meanwhile): each write copies the whole row, and decay needs no finer
// resolution. Too many pending ids are all written, to bound memory.
func duePending(pending map[string]int, written map[string]time.Time, now time.Time) map[string]int {
	due := map[string]int{}
	flushAll := len(pending) > accessMaxPending
	for id, n := range pending {
		if flushAll || now.Sub(written[id]) >= accessThrottle {
			due[id] = n
			written[id] = now
			delete(pending, id)
		}
	}
	if len(written) > accessMaxPending {
		for id, t := range written {
			if now.Sub(t) >= accessThrottle {
				delete(written, id)
			}
		}
	}
	return due
}

func (a *accessRecorder) write(counts map[string]int) {
	if len(counts) == 0 {
		return
	}
	ids := make([]string, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	// One lock order for every writer (replicas of the service write the
	// same rows): sorted ids cannot deadlock each other.
	slices.Sort(ids)
	ns := make([]int32, len(ids))
	for i, id := range ids {
		ns[i] = int32(counts[id])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The statistics live in memory_access, not in the memories rows: a
	// write to a memories page clears its all-visible bit, and the
	// owner-local search's index-only scans would then read that heap page
	// until the next VACUUM (migration 8). Ids of memories deleted meanwhile
	// match nothing and are dropped.
	// The key-share lock on each memory orders the write with erase: an
	// erase deleting the memory waits for this insert to commit and then
	// deletes its row too, or this insert waits for the erase and finds
	// nothing. It marks the row locked without clearing the page's
	// all-visible bit.
	_, err := a.s.core.Pool.Exec(ctx, `WITH m AS (
			SELECT m.id, m.owner_id FROM `+a.s.sql.memories+` AS m WHERE m.id = ANY($1::uuid[]) ORDER BY m.id FOR KEY SHARE)
		INSERT INTO `+a.s.sql.access+` AS a (memory_id, owner_id, access_count, last_accessed_at)
		SELECT m.id, m.owner_id, c.n, now()
		FROM unnest($1::uuid[], $2::int[]) AS c(id, n) JOIN m ON m.id = c.id
		ORDER BY m.id
		ON CONFLICT (memory_id) DO UPDATE SET access_count = a.access_count + excluded.access_count,
			last_accessed_at = excluded.last_accessed_at`, ids, ns)
	if err != nil {
		a.s.core.Log.Warn("recording memory access statistics failed", "memories", len(ids), "error", err)
	}
}

// flush writes everything queued so far and waits for it.
func (a *accessRecorder) flush() {
	ack := make(chan struct{})
	select {
	case a.flushNow <- ack:
		<-ack
	case <-a.done:
	}
}

func (a *accessRecorder) close() {
	a.once.Do(func() {
		close(a.done)
		a.stopped.Wait()
	})
}
