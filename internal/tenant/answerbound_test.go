package tenant

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// citusRowsServer answers DetectCitus as a Citus coordinator whose
// pg_dist_node lists up to maxRows workers, each named by a 4 MiB host
// name: every message is under MaxServerMessage, the answer is not.
func citusRowsServer(t *testing.T, maxRows int) string {
	host := strings.Repeat("h", 4<<20)
	return fakePG(t, func(q string) fakeAnswer {
		a, _ := citusAnswer(q, func(emit func(...string) bool) {
			for range maxRows {
				if !emit(host, "5432") {
					return
				}
			}
		})
		return a
	})
}

// TestServerAnswerIsBounded (issue 26's seventh review, HIGH 1): a server
// a tenant runs answered the first statements of a provisioning with
// pg_dist_node rows of 4 MiB each (every message under MaxServerMessage)
// and the operator held 515 MiB after 0.7 s (its limit is 512Mi). Every
// answer is bounded now: the pass fails with ErrServerAnswerTooLarge and
// the heap grows by little more than MaxServerAnswer.
func TestServerAnswerIsBounded(t *testing.T) {
	url := citusRowsServer(t, 200) // 800 MiB if read whole
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	BoundMessages(&cfg.ConnConfig.Config) // as every operator connection
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stop := testenv.HeapPeak(5 * time.Millisecond)
	_, err = Provision(ctx, pool, newSpec("engram_answerbound", 3))
	grew := stop()
	t.Logf("provisioning on the hostile server: %v; heap grew %d MiB at most", err, grew>>20)
	if !errors.Is(err, ErrServerAnswerTooLarge) {
		t.Fatalf("provisioning on a server answering 800 MiB of rows: %v; want ErrServerAnswerTooLarge", err)
	}
	if grew > 3*MaxServerAnswer {
		t.Fatalf("the heap grew by %d MiB, want at most %d (three times the answer bound)", grew>>20, 3*MaxServerAnswer>>20)
	}
}
