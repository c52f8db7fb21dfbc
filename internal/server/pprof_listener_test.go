package server

import (
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/engram-dev/engram/internal/naming"
)

func TestPprofListenIsLoopbackOnlyAndOffByDefault(t *testing.T) {
	env := func(k string) string {
		if k == naming.EnvDatabaseURL {
			return "postgres://u@127.0.0.1/db"
		}
		return ""
	}
	base := []string{"--config=c.yaml", "--tokens-file=t"}
	o, err := ParseFlags(base, env, io.Discard)
	if err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if o.PprofListen != "" {
		t.Errorf("--pprof-listen defaults to %q: want off", o.PprofListen)
	}
	for addr, ok := range map[string]bool{
		"127.0.0.1:6060": true, "[::1]:6060": true, "localhost:6060": true,
		":6060": false, "0.0.0.0:6060": false, "10.0.0.5:6060": false, "6060": false,
		"127.0.0.1:8080": false, // the API's port (--listen default :8080 differs, so set it)
	} {
		args := append([]string{}, base...)
		if addr == "127.0.0.1:8080" {
			args = append(args, "--listen=127.0.0.1:8080")
		}
		_, err := ParseFlags(append(args, "--pprof-listen="+addr), env, io.Discard)
		if (err == nil) != ok {
			t.Errorf("--pprof-listen=%s: error %v, want accepted %v", addr, err, ok)
		}
	}
}

func TestPprofListenerServesProfiles(t *testing.T) {
	hs, ln, err := listenPprof("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /debug/pprof/cmdline: %s", resp.Status)
	}
	if hs, ln, err := listenPprof("", slog.New(slog.DiscardHandler)); hs != nil || ln != nil || err != nil {
		t.Errorf("an empty address opened a listener (%v, %v, %v)", hs, ln, err)
	}
}
