package testenv

import (
	"net"
	"testing"
)

// ServeLocal listens on 127.0.0.1 (a free port) until the test ends and
// serves each connection it accepts with serve, in a goroutine of its own:
// the fake servers of the bound tests (a hostile PostgreSQL, a proxy that
// rewrites its messages) start here. It returns the listener's address.
func ServeLocal(t testing.TB, serve func(net.Conn)) net.Addr {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // the listener is closed: the test ended
			}
			go serve(c)
		}
	}()
	return ln.Addr()
}
