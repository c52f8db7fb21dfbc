package tenant

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

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
