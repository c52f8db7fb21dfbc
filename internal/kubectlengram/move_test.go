package kubectlengram

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
)

// TestMovePatches: `move` names exactly one connection, clears the other
// (the CRD takes exactly one) and sets onChange: Move; `move abort` turns
// status.serverMove.from.via back into spec.database, and never into a
// Secret of another namespace.
func TestMovePatches(t *testing.T) {
	for _, c := range []struct {
		cluster, secret string
		want, via       string
	}{
		{"pg-b", "", `{"spec":{"database":{"clusterConnection":"pg-b","connectionSecretRef":null,"onChange":"Move"}}}`, "cluster/pg-b"},
		{"", "pg-admin", `{"spec":{"database":{"clusterConnection":null,"connectionSecretRef":{"name":"pg-admin"},"onChange":"Move"}}}`, "secret/team-a/pg-admin/uri"},
		{"", "pg-admin/url", `{"spec":{"database":{"clusterConnection":null,"connectionSecretRef":{"key":"url","name":"pg-admin"},"onChange":"Move"}}}`, "secret/team-a/pg-admin/url"},
	} {
		p, via, err := moveTargetPatch("team-a", c.cluster, c.secret)
		if err != nil {
			t.Fatalf("%q %q: %v", c.cluster, c.secret, err)
		}
		if got, _ := json.Marshal(p); string(got) != c.want || via != c.via {
			t.Errorf("move --to-cluster-connection %q --to-secret %q = %s (%s), want %s (%s)", c.cluster, c.secret, got, via, c.want, c.via)
		}
	}
	for _, bad := range [][2]string{{"", ""}, {"a", "b"}, {"", "/uri"}, {"", "a/b/c"}} {
		if _, _, err := moveTargetPatch("team-a", bad[0], bad[1]); err == nil {
			t.Errorf("move --to-cluster-connection %q --to-secret %q was accepted", bad[0], bad[1])
		}
	}

	for via, want := range map[string]string{
		"cluster/main":             `{"spec":{"database":{"clusterConnection":"main","connectionSecretRef":null}}}`,
		"secret/team-a/pg-old/uri": `{"spec":{"database":{"clusterConnection":null,"connectionSecretRef":{"key":"uri","name":"pg-old"}}}}`,
	} {
		p, err := viaPatch("team-a", via)
		if got, _ := json.Marshal(p); err != nil || string(got) != want {
			t.Errorf("abort from %s = %s, %v; want %s", via, got, err, want)
		}
	}
	for via, want := range map[string]string{
		"secret/team-b/pg-old/uri": `namespace "team-b"`,
		"database/pg-a":            "names no clusterConnection or Secret",
		"cluster/":                 "names no clusterConnection or Secret",
		"secret/team-a/pg-old":     "names no clusterConnection or Secret",
	} {
		if _, err := viaPatch("team-a", via); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("abort from %s: %v, want an error naming %s", via, err, want)
		}
	}
}

// The status screen follows a move: how far while it runs, the freeze
// and the old copy to confirm once switched.
func TestStatusShowsServerMove(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	from := memoryv1alpha1.RuntimeConnection{Via: "cluster/main", Database: "app"}
	to := memoryv1alpha1.RuntimeConnection{Via: "cluster/pg-b", Database: "app2"}
	st := &RuntimeStatus{Namespace: "team-a", Name: "bot", Ready: "True", ServerMove: &memoryv1alpha1.ServerMoveStatus{Run: 1, From: from, To: to,
		Phase: memoryv1alpha1.ServerMoveCatchingUp, CopiedRows: 198412, TotalRows: 200000, Passes: 3, LastDelta: 1204}}
	screen := func() string {
		var b strings.Builder
		if err := printRuntimeStatus(&b, st, now); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if want := "Moving:         CatchingUp pass 3, 198,412/200,000 rows (last pass 1,204 rows) to cluster/pg-b (database app2)\n"; !strings.Contains(screen(), want) {
		t.Errorf("status screen lacks %q:\n%s", want, screen())
	}
	frozen := metav1.NewTime(now.Add(-4 * time.Second))
	st.ServerMove.Phase, st.ServerMove.FreezeStartedAt = memoryv1alpha1.ServerMoveFrozen, &frozen
	if want := "Moving:         Frozen: writes refused (503) while the last rows are copied and verified, for 4s, to cluster/pg-b"; !strings.Contains(screen(), want) {
		t.Errorf("status screen lacks %q:\n%s", want, screen())
	}
	st.ServerMove.Phase, st.ServerMove.FreezeMillis = memoryv1alpha1.ServerMoveSwitched, 6240
	if want := "Server move:    Moved to cluster/pg-b (database app2) (freeze 6.2 s); old copy kept on cluster/main (database app): confirm with kubectl engram move confirm bot\n"; !strings.Contains(screen(), want) {
		t.Errorf("status screen lacks %q:\n%s", want, screen())
	}
	done := metav1.NewTime(now.Add(-time.Minute))
	st.ServerMove.Phase, st.ServerMove.FinishedAt, st.ServerMove.Message = memoryv1alpha1.ServerMoveFailed, &done, "verify: table memories differs"
	if want := "Server move:    Failed, to cluster/pg-b (database app2), 60s ago: verify: table memories differs\n"; !strings.Contains(screen(), want) {
		t.Errorf("status screen lacks %q:\n%s", want, screen())
	}
	st.ServerMove = nil
	if s := screen(); strings.Contains(s, "Moving") || strings.Contains(s, "Server move") {
		t.Errorf("a runtime never moved shows a move:\n%s", s)
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 200000: "200,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
