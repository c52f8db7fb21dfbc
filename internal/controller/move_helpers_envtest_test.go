package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/naming"
	"github.com/engram-dev/engram/internal/testenv"
)

// Helpers of the server move scenarios (move_envtest_test.go).

// moveSetup says how a server move scenario starts.
type moveSetup struct {
	instance string // the second PostgreSQL server (hack/pgvector.sh instance name)
	ns       string // the namespace's prefix
	// connPrefix names the operator-namespace connection Secret of the
	// target (with a random suffix); "" puts the target in a uri Secret
	// "own-pg" of the runtime's namespace instead.
	connPrefix string
	retain     bool // leave reclaimPolicy at its default (else Delete)
	rows       int  // memories seeded into the tenant's schema
}

// moveStart is what a server move scenario starts from: runtime "bot",
// onChange Move, Ready on the shared server, and a second server to move
// it to.
type moveStart struct {
	ns, schema string
	targetURL  string
	targetConn string // the target's connection Secret ("" with connPrefix "")
	rt         *memoryv1alpha1.MemoryRuntime
	from       memoryv1alpha1.RuntimeConnection // status.connection before the move
	login0     string                           // the service's login before the move
	key        types.NamespacedName
}

// startMove starts a second PostgreSQL server and runtime "bot" on the
// shared one, as s says.
func (e *operatorEnv) startMove(t *testing.T, s moveSetup) moveStart {
	t.Helper()
	in := testenv.NewInstance(t, s.instance)
	in.Start(t)
	m := moveStart{targetURL: in.NewDatabase(t)}
	if s.connPrefix != "" {
		m.targetConn = s.connPrefix + randomSuffix()
		mustCreate(t, e.c, connectionSecret(e.opNS, m.targetConn, m.targetURL))
	}
	m.ns = e.newNamespace(t, s.ns)
	if s.connPrefix == "" {
		mustCreate(t, e.c, uriSecret(m.ns, "own-pg", m.targetURL))
	}
	rt := newRuntime(m.ns, "bot", "")
	rt.Spec.Database.OnChange = memoryv1alpha1.OnChangeMove
	if !s.retain {
		rt.Spec.ReclaimPolicy = memoryv1alpha1.ReclaimDelete
	}
	m.rt = e.readyRuntime(t, rt)
	m.schema, m.from = m.rt.Status.Schema, *m.rt.Status.Connection
	if s.rows > 0 {
		seedMoveRows(t, e.adminURL, m.schema, s.rows)
	}
	m.login0, _ = e.tenantLogin(t, m.ns, "bot")
	m.key = types.NamespacedName{Namespace: m.ns, Name: "bot"}
	return m
}

// setDatabase changes runtime bot's spec.database.
func (e *operatorEnv) setDatabase(t *testing.T, ns string, mutate func(*memoryv1alpha1.DatabaseSpec)) {
	t.Helper()
	update(t, e, &memoryv1alpha1.MemoryRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"}}, func(r *memoryv1alpha1.MemoryRuntime) {
		mutate(&r.Spec.Database)
	})
}

// moveTo points runtime bot at the connection Secret conn.
func (e *operatorEnv) moveTo(t *testing.T, ns, conn string) {
	t.Helper()
	e.setDatabase(t, ns, func(d *memoryv1alpha1.DatabaseSpec) { d.ClusterConnection = conn })
}

// reachHold waits up to two minutes for the reconcile to stop at held's
// step; past that it frees it and fails the test with "the move never
// <never>".
func reachHold(t *testing.T, held *hold, never string) {
	t.Helper()
	select {
	case <-held.reached:
	case <-time.After(2 * time.Minute):
		held.free()
		t.Fatal("the move never " + never)
	}
}

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
	var n int64
	var sum string
	memories := pgx.Identifier{schema, "memories"}.Sanitize()
	if err := testenv.QueryRow(testContext(t), url, `SELECT count(*), coalesce(md5(string_agg(id::text || '|' || owner_id || '|' || content || '|' || embedding::text, ',' ORDER BY id)), '')
		FROM `+memories, nil, &n, &sum); err != nil {
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
	var missing []string
	if err := testenv.QueryRow(testContext(t), url, `SELECT coalesce(array_agg(w), '{}') FROM unnest($1::text[]) w
		WHERE NOT EXISTS (SELECT 1 FROM `+pgx.Identifier{schema, "memories"}.Sanitize()+` m WHERE m.content = w)`, []any{want}, &missing); err != nil {
		t.Fatal(err)
	}
	return missing
}
