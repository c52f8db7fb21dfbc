package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/engram-dev/engram/internal/memory"
)

// The jobs tenant is bulk-loaded with COPY (through pgx's CopyFrom), not
// through the API: a million adds with dedup would take most of an hour and
// measure the add path again. Each owner holds 1,000 rows, in a fixed
// pattern over the row index i, so every job has a known amount of work:
//
//	i odd            inactive for 60 days            -> purge (half of all rows)
//	i % 20 == 0      active, expired yesterday       -> expire
//	i % 20 == 2      active, contextual, 120 days old -> decay forgets (score 2^-8)
//	i % 20 == 4      active, exact copy of row i+2   -> compact supersedes
//	other even i     active and fresh (0-10 days)
const seedPerOwner = 1000

// Planted counts what the seed planted for each job.
type Planted struct {
	Inactive   int `json:"inactivePurgeable"`
	Expired    int `json:"expired"`
	Decayed    int `json:"decayed"`
	Duplicates int `json:"duplicates"`
	Fresh      int `json:"fresh"`
}

func plantedFor(rows int) Planted {
	owners := rows / seedPerOwner
	return Planted{Inactive: owners * 500, Expired: owners * 50, Decayed: owners * 50, Duplicates: owners * 50, Fresh: owners * 350}
}

var seedColumns = []string{"id", "owner_id", "agent_id", "session_id", "source", "category", "content", "importance",
	"embedding", "flags", "active", "expires_at", "created_at", "updated_at", "last_accessed_at", "access_count", "deactivated_at"}

// seedRows generates the rows of owners [from, to) for COPY.
type seedRows struct {
	c      *corpus
	emb    memory.Embedder
	policy memory.Policy
	now    time.Time
	owner  int
	to     int
	buf    [][]any
}

const day = 24 * time.Hour

// next returns the next row, nil at the end.
func (s *seedRows) next() ([]any, error) {
	if len(s.buf) == 0 {
		if s.owner >= s.to {
			return nil, nil
		}
		if err := s.fill(jobOwnerName(s.owner)); err != nil {
			return nil, err
		}
		s.owner++
	}
	row := s.buf[0]
	s.buf = s.buf[1:]
	return row, nil
}

func jobOwnerName(i int) string { return fmt.Sprintf("job-owner-%05d", i) }

// fill generates one owner's rows, embedding each text once (the duplicate
// of row i+2 reuses its text and vector).
func (s *seedRows) fill(owner string) error {
	items := make([]item, seedPerOwner)
	texts := make([]string, seedPerOwner)
	for i := range items {
		src := i
		if i%20 == 4 {
			src = i + 2
		}
		items[i] = s.c.stored(owner, src)
		texts[i] = items[i].Content
	}
	vecs, err := s.emb.Embed(context.Background(), texts)
	if err != nil {
		return err
	}
	for i, it := range items {
		s.buf = append(s.buf, s.row(owner, i, it, vecs[i]))
	}
	return nil
}

func (s *seedRows) row(owner string, i int, it item, vec []float32) []any {
	var (
		active              = true
		updated             = s.now.Add(-time.Duration(i%10) * day)
		expires, deactivate any
		category            = it.Category
	)
	if c, ok := s.policy.Category(category); ok && c.TTL > 0 {
		expires = updated.Add(time.Duration(c.TTL))
	}
	switch {
	case i%2 == 1:
		active, category = false, "contextual"
		updated = s.now.Add(-90 * day)
		expires, deactivate = s.now.Add(-60*day), s.now.Add(-60*day)
	case i%20 == 0:
		expires = s.now.Add(-day)
	case i%20 == 2:
		category, updated, expires = "contextual", s.now.Add(-120*day), nil
	}
	return []any{seedID(), owner, "", "", "agent", category, it.Content, int16(it.Importance),
		pgv.NewVector(vec), []string{}, active, expires, updated, updated, nil, int64(0), deactivate}
}

// seedID is a random UUIDv7-shaped id (time-ordered like the engine's).
func seedID() [16]byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	b[6] = 0x70 | (b[6] & 0x0f)
	b[8] = 0x80 | (b[8] & 0x3f)
	return b
}

// seed COPYs rows memories into the tenant in two parallel streams (one per
// core), adds one 'add' history row per memory with INSERT ... SELECT (the
// purge job deletes history too), and vacuums.
func (h *harness) seed(ctx context.Context, pool *pgxpool.Pool, adminURL, schema string, rows int) error {
	emb, err := memory.NewBuiltinEmbedder(benchDims)
	if err != nil {
		return err
	}
	owners := rows / seedPerOwner
	streams := 2
	now := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, streams)
	for k := range streams {
		from, to := owners*k/streams, owners*(k+1)/streams
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := &seedRows{c: h.corpus, emb: emb, policy: benchPolicy(), now: now, owner: from, to: to}
			n, err := pool.CopyFrom(ctx, pgx.Identifier{schema, "memories"}, seedColumns, pgx.CopyFromFunc(src.next))
			if err == nil && int(n) != (to-from)*seedPerOwner {
				err = fmt.Errorf("copied %d rows, want %d", n, (to-from)*seedPerOwner)
			}
			errs[k] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("copying memories: %w", err)
		}
	}
	mem, hist := pgx.Identifier{schema, "memories"}.Sanitize(), pgx.Identifier{schema, "memory_history"}.Sanitize()
	if _, err := pool.Exec(ctx, `INSERT INTO `+hist+` (memory_id, owner_id, action, actor, new_content, created_at)
		SELECT id, owner_id, 'add', source, content, created_at FROM `+mem); err != nil {
		return fmt.Errorf("adding history rows: %w", err)
	}
	return settleTable(ctx, adminURL, schema)
}
