package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// profileRun is a CPU profile of `manager serve` being taken through its
// pprof listener (manager serve --pprof-listen, off unless the harness runs
// with --pprof) while a cell runs.
type profileRun struct {
	h    *harness
	path string
	done chan error
}

// startProfile asks the service at base for a CPU profile of dur and saves
// it as <pprof dir>/<name>.pprof when it arrives; wait reports the outcome.
// The profile covers the whole cell, but the service only works in its own
// slices, so what it shows is the service's work.
func (h *harness) startProfile(ctx context.Context, base, name string, dur time.Duration) *profileRun {
	p := &profileRun{h: h, path: filepath.Join(h.pprofDir, name+".pprof"), done: make(chan error, 1)}
	secs := max(1, int(dur.Seconds()+0.5))
	go func() {
		ctx, cancel := context.WithTimeout(ctx, dur+time.Minute)
		defer cancel()
		p.done <- fetchProfile(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, secs), p.path)
	}()
	h.logf("pprof: taking a %d s CPU profile of manager serve into %s", secs, p.path)
	return p
}

// wait waits for the profile (nil: none was asked for) and logs the outcome:
// a failed profile is logged, it does not fail the part.
func (p *profileRun) wait() {
	if p == nil {
		return
	}
	if err := <-p.done; err != nil {
		p.h.logf("pprof: no profile: %v", err)
		return
	}
	p.h.logf("pprof: saved %s (read it: go tool pprof -top %s %s)", p.path, p.h.managerBin, p.path)
}

func fetchProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("profile request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("fetching %s: %s: %s", url, resp.Status, b)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the profile directory: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
