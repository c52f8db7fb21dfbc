package tenant

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
)

// MaxServerMessage bounds one protocol message the operator reads from a
// PostgreSQL server. pgx reads a message body whole, up to 1 GiB by
// default, before looking at it, and a connectionSecretRef may name a
// server the tenant runs: its first answer of 900 MiB held 904 MiB of the
// operator's heap (limit 512Mi) after 21 ms (issue 26's sixth review,
// HIGH 1). Nothing the operator reads comes near it: catalog rows, markers
// (maxMarkerBytes), notices, errors and pg_stat_activity's query text
// (track_activity_query_size, at most 1 MiB).
const MaxServerMessage = 8 << 20

// MaxServerAnswer bounds what the operator reads from one server between
// two of its own writes: the whole answer to a statement (or to a batch),
// every row and notice of it. MaxServerMessage bounds one message only,
// and a server the tenant runs sent pg_dist_node rows of 4 MiB each until
// the operator held 515 MiB (issue 26's seventh review, HIGH 1); a LIMIT
// in the statement binds an honest server only. The operator's largest
// honest answer is the lock watchdog's marked roles (10,000 at most,
// markers of at most 1 KiB: about 12 MiB) or pg_stat_activity of a big
// server (a few MiB).
const MaxServerAnswer = 32 << 20

// ErrServerAnswerTooLarge: a server answered one statement with more than
// MaxServerAnswer bytes; the operator closed the connection.
var ErrServerAnswerTooLarge = errors.New("the server's answer is larger than the operator reads from one statement")

// BoundMessages sets MaxServerMessage on cfg and bounds every answer to
// MaxServerAnswer (its fallbacks connect with it too).
func BoundMessages(cfg *pgconn.Config) {
	cfg.MaxProtocolMessageBodyLen = MaxServerMessage
	next := cfg.AfterNetConnect
	cfg.AfterNetConnect = func(ctx context.Context, c *pgconn.Config, conn net.Conn) (net.Conn, error) {
		if next != nil {
			var err error
			if conn, err = next(ctx, c, conn); err != nil {
				return nil, err
			}
		}
		return &answerBound{Conn: conn, limit: MaxServerAnswer}, nil
	}
}

// What pgx keeps of a connection beyond one answer, bounded per
// connection (issue 26's eighth review, HIGH 1: a tenant's server held
// 601 MiB of the operator's heap in 2.7 s with notifications, 555 MiB
// with ParameterStatus messages, 163 MiB with padded column names in
// pgx's statement cache).
const (
	// maxParameterStatus: the bytes of every ParameterStatus message of
	// one connection together (an honest server sends about 15, under
	// 1 KiB in all, and a few more when a setting changes).
	maxParameterStatus = 64 << 10
	// maxRowDescription: one RowDescription (the operator's widest
	// statements have a dozen columns of short names: under 1 KiB).
	maxRowDescription = 64 << 10
)

// ErrServerMessageRefused: a server sent what the operator never asks for
// (a notification: it listens on no channel) or more of what pgx keeps
// than the operator ever needs; the operator closed the connection.
var ErrServerMessageRefused = errors.New("the server sent a message the operator does not keep")

// answerBound is the connection as pgconn sees it, after TLS: every write
// (a statement, a batch, a Sync) starts a new answer, and an answer that
// reads past limit closes the connection. Above TLS, so a server cannot
// make it write (a TLS key update) to restart the count. It also follows
// the server's messages (type byte, length) and closes the connection on
// what pgx would keep beyond the answer: any NotificationResponse, more
// than maxParameterStatus of ParameterStatus, a RowDescription over
// maxRowDescription.
type answerBound struct {
	net.Conn
	limit int64
	read  atomic.Int64 // bytes read since the last write

	// The message framing, touched by the one goroutine that reads.
	header     [5]byte
	headerN    int
	bodyLeft   uint32
	paramBytes int
}

func (c *answerBound) Write(p []byte) (int, error) {
	c.read.Store(0)
	return c.Conn.Write(p)
}

func (c *answerBound) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.read.Add(int64(n)) > c.limit {
		_ = c.Close()
		return 0, fmt.Errorf("%w (%d MiB)", ErrServerAnswerTooLarge, c.limit>>20)
	}
	if ferr := c.follow(p[:n]); ferr != nil {
		_ = c.Close()
		return 0, ferr
	}
	return n, err
}

// follow walks the message headers in b, which continues the stream.
func (c *answerBound) follow(b []byte) error {
	for len(b) > 0 {
		if c.bodyLeft > 0 {
			skip := min(uint32(len(b)), c.bodyLeft)
			c.bodyLeft -= skip
			b = b[skip:]
			continue
		}
		k := copy(c.header[c.headerN:], b)
		c.headerN += k
		b = b[k:]
		if c.headerN < len(c.header) {
			return nil
		}
		c.headerN = 0
		body := binary.BigEndian.Uint32(c.header[1:]) - 4 // the length counts itself
		if err := c.admit(c.header[0], body); err != nil {
			return err
		}
		c.bodyLeft = body
	}
	return nil
}

// admit checks one message by its type and body length.
func (c *answerBound) admit(typ byte, body uint32) error {
	switch typ {
	case 'A': // NotificationResponse
		return fmt.Errorf("%w: a notification (the operator listens on no channel)", ErrServerMessageRefused)
	case 'S': // ParameterStatus
		c.paramBytes += int(body)
		if c.paramBytes > maxParameterStatus {
			return fmt.Errorf("%w: more than %d KiB of ParameterStatus", ErrServerMessageRefused, maxParameterStatus>>10)
		}
	case 'T': // RowDescription
		if body > maxRowDescription {
			return fmt.Errorf("%w: a row description of %d KiB (at most %d)", ErrServerMessageRefused, body>>10, maxRowDescription>>10)
		}
	}
	return nil
}
