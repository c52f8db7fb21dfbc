package controller

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/engram-dev/engram/internal/tenant"
	"github.com/engram-dev/engram/internal/testenv"
)

// hugeMessage is what the hostile server answers the first query with.
const hugeMessage = 900 << 20

// hugeMessageServer stands for a server a tenant's connectionSecretRef
// names and the tenant runs: it logs anyone in, then answers the first
// query with one NoticeResponse of hugeMessage bytes (pgx's own cap is
// 1 GiB). It listens on 127.0.0.1 and returns a URL with no TLS.
func hugeMessageServer(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("postgres://evil:pw@%s/engram?sslmode=disable", testenv.ServeLocal(t, answerHuge))
}

// answerHuge logs the client in and sends one message of hugeMessage
// bytes at its first query, 1 MiB at a time, until the client hangs up.
func answerHuge(c net.Conn) {
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	be := pgproto3.NewBackend(c, c)
	if _, err := be.ReceiveStartupMessage(); err != nil {
		return
	}
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 2}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := be.Flush(); err != nil {
		return
	}
	if _, err := be.Receive(); err != nil {
		return
	}
	hdr := []byte{'N', 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[1:], hugeMessage+4)
	if _, err := c.Write(hdr); err != nil {
		return
	}
	zeros := make([]byte, 1<<20)
	for range hugeMessage >> 20 {
		if _, err := c.Write(zeros); err != nil {
			return
		}
	}
}

// TestHostileServerMessageIsBounded (issue 26's sixth review, HIGH 1): a
// server a tenant runs answered the first statement of a provisioning
// with one 900 MiB message, and the operator held 904 MiB of heap (its
// limit is 512Mi) after 21 ms. Every operator connection now refuses a
// message over tenant.MaxServerMessage: the pass fails with the
// body-length error and the heap stays small, through the admin pool and
// through the lock watchdog's own connection (from a config without the
// bound: it sets it itself).
func TestHostileServerMessageIsBounded(t *testing.T) {
	url := hugeMessageServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pools := newPoolCache(Options{PoolMaxConns: 2, ConnectTimeout: 5 * time.Second, LockTimeout: time.Second, DatabaseTimeout: 5 * time.Second})
	t.Cleanup(func() { cancel(); _ = pools.Start(ctx) })
	pool, err := pools.get("secret/team-evil/own/uri", url)
	if err != nil {
		t.Fatal(err)
	}
	stop := testenv.HeapPeak(10 * time.Millisecond)
	_, err = tenant.Provision(ctx, pool, tenant.Spec{Schema: "evil", Dimensions: 3,
		Owner: tenant.Owner{UID: "uid-evil", Namespace: "team-evil", Name: "evil"}})
	grew := stop()
	assertBodyTooLong(t, "provisioning", err, grew)

	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	stop = testenv.HeapPeak(10 * time.Millisecond)
	w, err := tenant.OpenLockWatchdog(ctx, cfg, tenant.LockPolicy{})
	if w != nil {
		_ = w.Close(context.Background())
	}
	assertBodyTooLong(t, "the lock watchdog", err, stop())
}

func assertBodyTooLong(t *testing.T, what string, err error, grew uint64) {
	t.Helper()
	var long *pgproto3.ExceededMaxBodyLenErr
	if !errors.As(err, &long) {
		t.Errorf("%s against the hostile server: %v; want the body-length error", what, err)
	}
	if grew > 64<<20 {
		t.Errorf("%s against the hostile server: the heap grew by %d MiB; want it to stay under 64 MiB", what, grew>>20)
	}
}
