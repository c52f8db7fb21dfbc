package tenant

import (
	"context"
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
// (maxMarkerBytesSQL), notices, errors and pg_stat_activity's query text
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

// answerBound is the connection as pgconn sees it, after TLS: every write
// (a statement, a batch, a Sync) starts a new answer, and an answer that
// reads past limit closes the connection. Above TLS, so a server cannot
// make it write (a TLS key update) to restart the count.
type answerBound struct {
	net.Conn
	limit int64
	read  atomic.Int64 // bytes read since the last write
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
	return n, err
}
