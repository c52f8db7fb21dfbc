package tenant

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/engram-dev/engram/internal/testenv"
)

// oneConnPool is an admin pool of one connection, bound as the operator's
// are (BoundMessages): every pass goes through the same connection, as in
// a busy pool whose connections live up to an hour.
func oneConnPool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "5000"
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "60000"
	BoundMessages(&cfg.ConnConfig.Config)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestHonestServerProvisionsManyTenantsOnOneConnection (issue 26's ninth
// review, L1): with a superuser admin every migration's SET LOCAL ROLE
// makes PostgreSQL re-send is_superuser, about 806 bytes of ParameterStatus
// per first provisioning, and the lifetime bound of 64 KiB refused an
// honest server's pooled connection at the 94th tenant ("conn closed").
// 120 first provisionings through one pooled connection of a throw-away
// instance all succeed.
func TestHonestServerProvisionsManyTenantsOnOneConnection(t *testing.T) {
	in := testenv.NewInstance(t, "tenant-paramstatus")
	in.Start(t)
	pool := oneConnPool(t, in.NewDatabase(t))
	const tenants = 120
	for i := range tenants {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		_, err := Provision(ctx, pool, newSpec(fmt.Sprintf("engram_ps%d", i), 3))
		cancel()
		if err != nil {
			t.Fatalf("first provisioning of tenant %d of %d through one pooled connection: %v", i+1, tenants, err)
		}
	}
	if n := pool.Stat().NewConnsCount(); n != 1 {
		t.Fatalf("%d connections opened; want the one for every pass", n)
	}
}

// TestParameterStatusRefusalReachesTheCaller (issue 26's ninth review, L1):
// a proxy in front of a real PostgreSQL adds what a hostile server sends
// with the first is_superuser after the startup (at the migration's SET
// LOCAL ROLE). The connection is refused, and the provisioning's error
// says why with ErrServerMessageRefused (the statements after the refused
// one see only "conn closed").
func TestParameterStatusRefusalReachesTheCaller(t *testing.T) {
	in := testenv.NewInstance(t, "tenant-paramstatus")
	in.Start(t)
	dbURL := in.NewDatabase(t)
	param := func(name, value string) []byte { return serverMessage('S', []byte(name+"\x00"+value+"\x00")) }
	var names []byte
	for i := range maxParameterNames + 1 {
		names = append(names, param("x_"+strconv.Itoa(i), "v")...)
	}
	for what, extra := range map[string][]byte{
		"65 names":         names,
		"a value of 8 KiB": param("TimeZone", strings.Repeat("z", 8<<10)),
	} {
		pool := oneConnPool(t, throughParamProxy(t, dbURL, extra))
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		_, err := Provision(ctx, pool, newSpec("engram_psx", 3))
		cancel()
		if !errors.Is(err, ErrServerMessageRefused) {
			t.Errorf("ParameterStatus of %s: provisioning returned %v; want ErrServerMessageRefused in it", what, err)
		}
	}
}

// throughParamProxy returns dbURL through a proxy on 127.0.0.1 that
// forwards to its server and writes extra after the first is_superuser
// the server sends after the startup (once a connection).
func throughParamProxy(t *testing.T, dbURL string, extra []byte) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	upstream := u.Host
	u.Host = testenv.ServeLocal(t, func(c net.Conn) { proxyParams(c, upstream, extra) }).String()
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return u.String()
}

func proxyParams(c net.Conn, upstream string, extra []byte) {
	defer c.Close()
	up, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	r, w := bufio.NewReader(up), bufio.NewWriter(c)
	ready, sent := false, false
	for {
		var h [5]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(h[1:])-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		_ = msg(w, h[0], body)
		switch {
		case h[0] == 'Z':
			ready = true
		case h[0] == 'S' && ready && !sent && strings.HasPrefix(string(body), "is_superuser\x00"):
			_, _ = w.Write(extra)
			sent = true
		}
		if r.Buffered() == 0 && w.Flush() != nil {
			return
		}
	}
}
