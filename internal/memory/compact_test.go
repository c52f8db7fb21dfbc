package memory

import (
	"testing"
	"time"
)

func TestClusters(t *testing.T) {
	now := time.Now()
	v := func(x, y float32) []float32 { return []float32{x, y} }
	rows := []compactRow{
		{id: "a", category: "p", importance: 5, vec: v(1, 0), updatedAt: now},
		{id: "b", category: "p", importance: 9, vec: v(0.999, 0.01), updatedAt: now},
		{id: "c", category: "p", importance: 5, vec: v(1, 0.001), updatedAt: now.Add(time.Hour)},
		{id: "d", category: "q", importance: 9, vec: v(1, 0), updatedAt: now},
		{id: "e", category: "p", importance: 5, vec: v(0, 1), updatedAt: now},
	}
	got := clusters(rows, 0.95)
	if len(got) != 1 || got[0].keeper != "b" || len(got[0].losers) != 2 || got[0].losers[0] != "c" || got[0].losers[1] != "a" {
		t.Fatalf("clusters = %+v; want b keeping c (newer) and a, d alone (other category), e alone", got)
	}
	if len(clusters(rows[:1], 0.95)) != 0 {
		t.Fatal("a single row formed a cluster")
	}
}
