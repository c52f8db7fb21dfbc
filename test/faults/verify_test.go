package faults

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/engram-dev/engram/internal/memory"
)

// verdict counts what became of the acknowledged writes.
type verdict struct {
	lost    int // gone (or changed) without an eviction record
	evicted int // gone, with an eviction in the memory's history
	// evictedPlain counts evictions of plain writers' writes (owners
	// under the cap: there must be none).
	evictedPlain int
	fullAcked    int // acknowledged writes into the full owner
}

// verify reads every acknowledged memory back. A memory that is there with
// its content is kept; one that is gone is evicted if its history holds
// the eviction (the one row an evicted memory keeps), else lost. The
// first lost writes are logged with the service's log lines of the write.
func (r loadResult) verify(ctx context.Context, t *testing.T, svc *service) verdict {
	t.Helper()
	var v verdict
	for id, w := range r.acked {
		if w.writer == fullWriter {
			v.fullAcked++
		}
		o := readBack(ctx, svc, "/v1/owners/"+w.owner+"/memories/"+id)
		var m struct {
			Content string `json:"content"`
		}
		if o.status == http.StatusOK && json.Unmarshal(o.body, &m) == nil && m.Content == w.content {
			continue
		}
		if o.status == http.StatusNotFound && evictedInHistory(ctx, svc, w.owner, id) {
			v.evicted++
			if w.writer != fullWriter {
				v.evictedPlain++
			}
			continue
		}
		v.lost++
		if v.lost <= 3 {
			t.Logf("acknowledged memory %s of %s: status %d body %s\nservice log of the write %s:\n%s",
				id, w.owner, o.status, o.body, w.requestID, svc.logs.linesOf(w.requestID))
		}
	}
	return v
}

// readBack GETs path, again while the service answers 503: a pooled
// connection that died in the fault fails the one request that meets it
// with the documented retryable answer, which says nothing of the data (a
// CI run counted such a read as a lost write). Bounded: 20 tries, 250 ms
// apart; a 503 that outlasts them stays the answer, and counts as lost.
func readBack(ctx context.Context, svc *service, path string) outcome {
	o := svc.call(ctx, "GET", path, nil)
	for try := 1; try < 20 && o.status == http.StatusServiceUnavailable; try++ {
		select {
		case <-ctx.Done():
			return o
		case <-time.After(250 * time.Millisecond):
		}
		o = svc.call(ctx, "GET", path, nil)
	}
	return o
}

// evictedInHistory reports whether the history of owner's memory id
// records its eviction over the per-owner cap.
func evictedInHistory(ctx context.Context, svc *service, owner, id string) bool {
	o := readBack(ctx, svc, "/v1/owners/"+owner+"/memories/"+id+"/history")
	var h struct {
		Items []memory.HistoryEntry `json:"items"`
	}
	if o.status != http.StatusOK || json.Unmarshal(o.body, &h) != nil {
		return false
	}
	for _, e := range h.Items {
		if e.Action == memory.HistoryEvict {
			return true
		}
	}
	return false
}
