package memory

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// BenchmarkAdd measures the add path (validate, redact, guard, embed, one
// transaction under the owner's lock), one add at a time, so the cost of
// the owner lock shows against the rest. "existing owner" adds to an owner
// that already has memories (the common case); "new owner" is every
// owner's first add.
//
//	go test ./internal/memory -run '^$' -bench BenchmarkAdd -benchtime 400x -count 3
func BenchmarkAdd(b *testing.B) {
	f := newFixture(b)
	f.add(AddRequest{Owner: "bench", Content: "the first memory of the bench owner"})
	b.Run("existing owner", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := f.store.Add(ctx(b), AddRequest{Owner: "bench", Content: benchText(i)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("new owner", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := f.store.Add(ctx(b), AddRequest{Owner: fmt.Sprintf("o%d-%d", b.N, i), Content: benchText(i)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchText is a fresh fact per i, far from the others (no dedup merge).
func benchText(i int) string {
	return fmt.Sprintf("fact %d: prefers tool %x over %x for task %o", i, i*7919, i*104729, i*31)
}

// BenchmarkOwnerLock measures the owner lock alone: a transaction that
// takes it and commits.
func BenchmarkOwnerLock(b *testing.B) {
	f := newFixture(b)
	f.add(AddRequest{Owner: "bench", Content: "the first memory of the bench owner"})
	b.Run("existing owner", func(b *testing.B) {
		for b.Loop() {
			if err := f.store.inTx(ctx(b), func(tx pgx.Tx) error { return f.store.lockOwner(ctx(b), tx, "bench") }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("new owner", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			owner := fmt.Sprintf("l%d-%d", b.N, i)
			if err := f.store.inTx(ctx(b), func(tx pgx.Tx) error { return f.store.lockOwner(ctx(b), tx, owner) }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
