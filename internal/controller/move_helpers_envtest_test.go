package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// Helpers of the server move scenarios (move_envtest_test.go).

// waitServerMove waits until status.serverMove.phase is phase.
func (e *operatorEnv) waitServerMove(t *testing.T, ns, name, phase string) *memoryv1alpha1.MemoryRuntime {
	t.Helper()
	var rt memoryv1alpha1.MemoryRuntime
	eventually(t, fmt.Sprintf("%s/%s status.serverMove.phase %s", ns, name, phase), 3*time.Minute, func() error {
		if err := e.get(t, ns, name, &rt); err != nil {
			return err
		}
		if mv := rt.Status.ServerMove; mv == nil || mv.Phase != phase {
			return fmt.Errorf("status.serverMove = %+v", mv)
		}
		return nil
	})
	return &rt
}

// watchTemplateHashes polls the Deployment's pod template hash every 50 ms
// until the test ends; the returned func lists the distinct hashes seen,
// in order.
func (e *operatorEnv) watchTemplateHashes(t *testing.T, ns, name string) func() []string {
	var mu sync.Mutex
	var seen []string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var d appsv1.Deployment
			if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err == nil {
				h := d.Spec.Template.Annotations[naming.AnnotationConfigHash]
				mu.Lock()
				if h != "" && (len(seen) == 0 || seen[len(seen)-1] != h) {
					seen = append(seen, h)
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// seedMoveRows writes n memories into the tenant's schema.
func seedMoveRows(t *testing.T, url, schema string, n int) {
	t.Helper()
	memories := pgx.Identifier{schema, "memories"}.Sanitize()
	if err := testenv.Exec(testContext(t), url, fmt.Sprintf(`INSERT INTO %s (id, owner_id, source, category, content, embedding)
		SELECT gen_random_uuid(), 'owner-' || (i %% 7), 'user', 'fact', 'memory number ' || i, array_fill((i %% 13)::real / 13, ARRAY[384])::vector
		FROM generate_series(1, %d) i`, memories, n)); err != nil {
		t.Fatal(err)
	}
}

// moveChecksum counts the tenant's memories and checksums them (ids,
// owners, contents and vectors).
func moveChecksum(t *testing.T, url, schema string) (int64, string) {
	t.Helper()
	ctx := testContext(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	var sum string
	memories := pgx.Identifier{schema, "memories"}.Sanitize()
	if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(md5(string_agg(id::text || '|' || owner_id || '|' || content || '|' || embedding::text, ',' ORDER BY id)), '')
		FROM `+memories).Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	return n, sum
}

// moveInsert writes one memory with the login uri (the service's).
func moveInsert(uri, schema, content string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, uri)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, "memories"}.Sanitize()+` (id, owner_id, source, category, content, embedding)
		VALUES (gen_random_uuid(), 'alice', 'user', 'fact', $1, array_fill(0.5::real, ARRAY[384])::vector)`, content)
	return err
}

// moveWriter inserts a memory every 10 ms through one login (reconnecting
// after an error) and keeps the contents PostgreSQL acknowledged.
type moveWriter struct {
	mu      sync.Mutex
	acked   []string
	refused int
	cancel  context.CancelFunc
	done    chan struct{}
}

func startMoveWriter(uri, schema string) *moveWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &moveWriter{cancel: cancel, done: make(chan struct{})}
	insert := `INSERT INTO ` + pgx.Identifier{schema, "memories"}.Sanitize() + ` (id, owner_id, source, category, content, embedding)
		VALUES (gen_random_uuid(), 'writer', 'user', 'fact', $1, array_fill(0.25::real, ARRAY[384])::vector)`
	go func() {
		defer close(w.done)
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				conn.Close(context.Background())
			}
		}()
		for i := 0; ctx.Err() == nil; i++ {
			content := fmt.Sprintf("acked-%d", i)
			err := func() error {
				if conn == nil {
					c, err := pgx.Connect(ctx, uri)
					if err != nil {
						return err
					}
					conn = c
				}
				_, err := conn.Exec(ctx, insert, content)
				return err
			}()
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, content)
			} else {
				w.refused++
				if conn != nil {
					conn.Close(context.Background())
					conn = nil
				}
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the writer and returns what was acknowledged and how many
// writes failed.
func (w *moveWriter) stop() ([]string, int) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.refused
}

// moveMissing lists the contents of want that no memory of the schema has.
func moveMissing(t *testing.T, url, schema string, want []string) []string {
	t.Helper()
	ctx := testContext(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var missing []string
	if err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(w), '{}') FROM unnest($1::text[]) w
		WHERE NOT EXISTS (SELECT 1 FROM `+pgx.Identifier{schema, "memories"}.Sanitize()+` m WHERE m.content = w)`, want).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	return missing
}
