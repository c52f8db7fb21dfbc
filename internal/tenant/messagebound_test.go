package tenant

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// serverMessage frames one backend message: type, length, body.
func serverMessage(typ byte, body []byte) []byte {
	out := []byte{typ}
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)+4))
	return append(out, body...)
}

// readThroughBound sends stream from a server over a pipe to a connection
// wrapped as every operator connection is (BoundMessages), reads it in
// small pieces (messages split across reads), and returns the error the
// reading ended with (nil at the end of the stream).
func readThroughBound(t *testing.T, stream []byte) error {
	t.Helper()
	var cfg pgconn.Config
	BoundMessages(&cfg)
	server, client := net.Pipe()
	defer server.Close()
	conn, err := cfg.AfterNetConnect(context.Background(), &cfg, client)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() {
		_, _ = server.Write(stream)
		_ = server.Close()
	}()
	buf := make([]byte, 7)
	for {
		if _, err := conn.Read(buf); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// TestServerKeepsNothingUnbounded (issue 26's eighth review, HIGH 1): the
// answer bound limited one answer, not what pgx keeps after it: a
// tenant's server held 601 MiB of the operator's heap in 2.7 s with
// notifications, 555 MiB with ParameterStatus messages of new names, and
// 163 MiB with padded column names in pgx's statement cache. Every
// operator connection now ends at the first notification (the operator
// listens on no channel), at 64 KiB of ParameterStatus, or at a row
// description over 64 KiB; an honest server's messages pass.
func TestServerKeepsNothingUnbounded(t *testing.T) {
	param := func(name, value string) []byte { return serverMessage('S', []byte(name+"\x00"+value+"\x00")) }
	var honest bytes.Buffer
	for _, kv := range [][2]string{{"server_version", "17.12"}, {"client_encoding", "UTF8"}, {"DateStyle", "ISO, MDY"},
		{"TimeZone", "UTC"}, {"integer_datetimes", "on"}, {"standard_conforming_strings", "on"}} {
		honest.Write(param(kv[0], kv[1]))
	}
	honest.Write(serverMessage('T', bytes.Repeat([]byte("c"), 900)))
	for range 1000 { // rows are the answer's, bounded by MaxServerAnswer
		honest.Write(serverMessage('D', bytes.Repeat([]byte("d"), 1000)))
	}
	honest.Write(serverMessage('Z', []byte("I")))
	if err := readThroughBound(t, honest.Bytes()); err != nil {
		t.Fatalf("an honest server's messages: %v", err)
	}

	var params bytes.Buffer
	for i := range 100 {
		params.Write(param("x_"+strings.Repeat("p", i), strings.Repeat("v", 1<<10)))
	}
	for name, stream := range map[string][]byte{
		"a notification":               serverMessage('A', []byte("\x00\x00\x00\x07ch\x00payload\x00")),
		"100 KiB of ParameterStatus":   params.Bytes(),
		"a row description of 100 KiB": serverMessage('T', bytes.Repeat([]byte("c"), 100<<10)),
		"a notification after an honest answer": append(append([]byte{}, honest.Bytes()...),
			serverMessage('A', []byte("\x00\x00\x00\x07ch\x00payload\x00"))...),
	} {
		if err := readThroughBound(t, stream); !errors.Is(err, ErrServerMessageRefused) {
			t.Errorf("%s: %v; want ErrServerMessageRefused", name, err)
		}
	}
}

// TestBackendKeyDataIsBounded (issue 26's ninth review, MEDIUM 1): pgconn
// keeps the server's BackendKeyData for the connection's life, and the
// answer bound let one of 8 MiB through: 16 operator connections to a
// tenant's server kept 129 MiB. A key over 256 bytes (protocol 3.2's
// largest) now ends the connection as it opens.
func TestBackendKeyDataIsBounded(t *testing.T) {
	for _, key := range []int{4, 256} {
		if err := connectWithKey(t, key); err != nil {
			t.Fatalf("a BackendKeyData of %d bytes: %v", key, err)
		}
	}
	err := connectWithKey(t, MaxServerMessage-4)
	if !errors.Is(err, ErrServerMessageRefused) {
		t.Fatalf("a BackendKeyData of 8 MiB: %v; want ErrServerMessageRefused", err)
	}
}

// connectWithKey connects as the operator does to a server on 127.0.0.1
// that sends a BackendKeyData of keyLen bytes of secret key.
func connectWithKey(t *testing.T, keyLen int) error {
	return connectToOneShot(t, func(c net.Conn) {
		key := binary.BigEndian.AppendUint32(nil, 4242)
		key = append(key, make([]byte, keyLen)...)
		answer := slices.Concat(serverMessage('R', []byte{0, 0, 0, 0}), serverMessage('K', key), serverMessage('Z', []byte("I")))
		if _, err := c.Write(answer); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, c) // until the client goes
	})
}

// connectToOneShot connects as the operator does (BoundMessages) to a
// server on 127.0.0.1 that reads one client's startup message and leaves
// the rest of the conversation to serve.
func connectToOneShot(t *testing.T, serve func(c net.Conn)) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(hdr[:4]))-8); err != nil {
			return
		}
		serve(c)
	}()
	cfg, err := pgconn.ParseConfig("postgres://evil:pw@" + ln.Addr().String() + "/engram?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	BoundMessages(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// TestSmallMessagesAreBounded (issue 26's ninth review, MEDIUM 1): only
// rows, errors, notices and copy data may be large (the answer bounds
// them, and pgx keeps none past it); every other message is at most
// 64 KiB (a ParameterDescription of 256 KiB, kept in pgx's statement
// cache, passed).
func TestSmallMessagesAreBounded(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1<<20)
	for _, typ := range []byte{'D', 'E', 'N', 'd'} {
		if err := readThroughBound(t, serverMessage(typ, big)); err != nil {
			t.Errorf("a message %q of 1 MiB: %v; want it read", typ, err)
		}
	}
	for _, typ := range []byte{'t', 'R', 'C', 'Z', '1', 'n', 'v', 'G', 'H', 'W'} {
		if err := readThroughBound(t, serverMessage(typ, big[:256<<10])); !errors.Is(err, ErrServerMessageRefused) {
			t.Errorf("a message %q of 256 KiB: %v; want ErrServerMessageRefused", typ, err)
		}
	}
	if err := readThroughBound(t, serverMessage('t', big[:2+4*100])); err != nil {
		t.Errorf("a ParameterDescription of 100 parameters: %v", err)
	}
}

// TestParameterStatusBoundedByName (issue 26's ninth review, L1): the
// ParameterStatus bound counted every message of a connection's life, and
// an honest server re-sends is_superuser at every SET ROLE: a pooled
// connection was refused after about 94 first provisionings. What pgconn
// keeps is one value per name: at most 64 names now, each message at most
// 4 KiB, re-sent as often as the server likes.
func TestParameterStatusBoundedByName(t *testing.T) {
	param := func(name, value string) []byte { return serverMessage('S', []byte(name+"\x00"+value+"\x00")) }
	var honest bytes.Buffer
	for i := range 20 {
		honest.Write(param("setting_"+strconv.Itoa(i), "on"))
	}
	for i := range 20_000 { // 20,000 SET ROLEs: about 500 KiB
		honest.Write(param("is_superuser", []string{"off", "on"}[i%2]))
	}
	honest.Write(param("search_path", strings.Repeat("s", 3<<10)))
	honest.Write(serverMessage('S', nil)) // malformed, but no new name
	if err := readThroughBound(t, honest.Bytes()); err != nil {
		t.Fatalf("20 names, is_superuser re-sent 20,000 times and a value of 3 KiB: %v", err)
	}

	var names bytes.Buffer
	for i := range maxParameterNames + 1 {
		names.Write(param("x_"+strconv.Itoa(i), "v"))
	}
	for what, stream := range map[string][]byte{
		"65 names":         names.Bytes(),
		"a value of 8 KiB": param("TimeZone", strings.Repeat("z", 8<<10)),
	} {
		if err := readThroughBound(t, stream); !errors.Is(err, ErrServerMessageRefused) {
			t.Errorf("ParameterStatus of %s: %v; want ErrServerMessageRefused", what, err)
		}
	}
}

// TestSCRAMIterationsAreBounded (issue 26's ninth review, L3): pgx takes
// up to 10,000,000 SCRAM iterations from the server and computes them
// before it looks at a deadline: 2.4 s of one core a connection, asked by
// a tenant's server at every connection. Over 100,000 (PostgreSQL's
// default is 4,096) the connection ends before pgx computes anything.
func TestSCRAMIterationsAreBounded(t *testing.T) {
	if err := connectSCRAM(t, "4096"); errors.Is(err, ErrServerMessageRefused) {
		t.Fatalf("SCRAM with 4,096 iterations: %v", err)
	}
	for _, iterations := range []string{"10000000", "100001", strings.Repeat("9", 100)} {
		start := time.Now()
		err := connectSCRAM(t, iterations)
		if !errors.Is(err, ErrServerMessageRefused) {
			t.Fatalf("SCRAM with %s iterations: %v; want ErrServerMessageRefused", iterations, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("SCRAM with %s iterations: refused after %s", iterations, took)
		}
	}
}

// connectSCRAM connects as the operator does to a server on 127.0.0.1
// that asks SCRAM-SHA-256 with the given iterations, then ends the
// connection after the client's proof.
func connectSCRAM(t *testing.T, iterations string) error {
	return connectToOneShot(t, func(c net.Conn) {
		sasl := binary.BigEndian.AppendUint32(nil, 10)
		if _, err := c.Write(serverMessage('R', append(sasl, "SCRAM-SHA-256\x00\x00"...))); err != nil {
			return
		}
		var h [5]byte // SASLInitialResponse: "n,,n=,r=<client nonce>"
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return
		}
		first := make([]byte, binary.BigEndian.Uint32(h[1:])-4)
		if _, err := io.ReadFull(c, first); err != nil {
			return
		}
		_, nonce, _ := strings.Cut(string(first), ",r=")
		cont := binary.BigEndian.AppendUint32(nil, 11)
		cont = append(cont, "r="+nonce+"server,s=c2FsdHNhbHRzYWx0c2FsdA==,i="+iterations...)
		if _, err := c.Write(serverMessage('R', cont)); err != nil {
			return
		}
		_, _ = io.CopyN(io.Discard, c, 1) // the client's proof, or its going
	})
}
