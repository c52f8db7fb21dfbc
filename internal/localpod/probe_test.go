package localpod

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaitOK: it waits through non-200 answers, gives up at once when the
// process is gone, and at the timeout with the last answer in the error.
func TestWaitOK(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	alive := func() error { return nil }
	ctx := context.Background()
	if err := WaitOK(ctx, srv.URL, 10*time.Second, alive); err != nil || calls.Load() != 3 {
		t.Fatalf("WaitOK = %v after %d probes, want nil after 3", err, calls.Load())
	}

	gone := errors.New("process exited")
	if err := WaitOK(ctx, srv.URL, 10*time.Second, func() error { return gone }); !errors.Is(err, gone) {
		t.Errorf("WaitOK with an exited process = %v", err)
	}

	never := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	defer never.Close()
	start := time.Now()
	err := WaitOK(ctx, never.URL, 500*time.Millisecond, alive)
	if err == nil || !strings.Contains(err.Error(), "no 200 from") || !strings.Contains(err.Error(), "418") {
		t.Errorf("WaitOK on a server that never answers 200 = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("WaitOK took %s for a 500ms timeout", d)
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := WaitOK(canceled, never.URL, 10*time.Second, alive); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitOK with a canceled context = %v", err)
	}

	if port, err := FreePort(); err != nil || port <= 0 {
		t.Errorf("FreePort = %d, %v", port, err)
	}
}

// TestWaitOKHTTPS: an https probe, as the kubelet's for a runtime with
// spec.service.tls, does not verify the certificate (httptest's is
// self-signed).
func TestWaitOKHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	if err := WaitOK(context.Background(), srv.URL, 10*time.Second, func() error { return nil }); err != nil {
		t.Errorf("WaitOK over https = %v", err)
	}
}
