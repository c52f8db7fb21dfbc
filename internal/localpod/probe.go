package localpod

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// FreePort asks the kernel for a free port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// probeInterval is the pause between two probes of WaitOK.
const probeInterval = 200 * time.Millisecond

// WaitOK polls url until it answers 200 OK, exited returns an error (the
// process behind url is gone, so waiting longer is pointless), ctx ends or
// timeout passes. The local kubelet waits for readiness probes with it, the
// benchmark for the processes it starts.
func WaitOK(ctx context.Context, url string, timeout time.Duration, exited func() error) error {
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Like the kubelet's probes, an https probe does not verify the
	// certificate: it asks whether the process serves, not who it is.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	defer client.CloseIdleConnections()
	for {
		if err := exited(); err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(wait, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("probing %s: %w", url, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("answered %s", resp.Status)
		}
		select {
		case <-wait.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return errors.Join(fmt.Errorf("no 200 from %s within %s", url, timeout), err)
		case <-time.After(probeInterval):
		}
	}
}
