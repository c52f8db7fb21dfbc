package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestDrainingClosesKeptAliveConnections: once shutdown starts (SIGTERM;
// /readyz fails for --shutdown-delay while the pod leaves the Service's
// endpoints), every answer closes its connection, so a busy client moves
// to a new connection, and a pod that stays, at once. Before, it kept
// reusing its kept-alive connection to the stopping pod until Shutdown
// closed it as idle, and a POST sent at that moment failed with EOF (the
// node suite saw it under kubectl drain).
func TestDrainingClosesKeptAliveConnections(t *testing.T) {
	tn := newTenant(t)
	srv := tn.serve(t, serverSetup{args: []string{"--shutdown-delay=3s"}})
	var dials atomic.Int32
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
	}}
	defer hc.CloseIdleConnections()
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := hc.Get(srv.base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		// Read to the end: only then may the connection be reused.
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for range 3 {
		if resp := get("/healthz"); resp.Close { //nolint:bodyclose // get reads and closes it
			t.Fatalf("before shutdown an answer closed its connection")
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d connections for 3 requests before shutdown, want 1 kept alive", n)
	}

	srv.cancel() // SIGTERM
	deadline := time.Now().Add(2 * time.Second)
	for get("/readyz").StatusCode != http.StatusServiceUnavailable { //nolint:bodyclose // get reads and closes it
		if time.Now().After(deadline) {
			t.Fatal("/readyz does not fail after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := dials.Load()
	for i := range 3 {
		if resp := get("/healthz"); !resp.Close { //nolint:bodyclose // get reads and closes it
			t.Errorf("answer %d while draining keeps its connection alive, want Connection: close", i)
		}
	}
	if n := dials.Load() - before; n != 3 {
		t.Errorf("%d new connections for 3 requests while draining, want one each", n)
	}
}
