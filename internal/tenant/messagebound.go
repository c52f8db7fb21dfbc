package tenant

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
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
// MaxServerAnswer (its fallbacks connect with it too). A smaller message
// bound already set stays (BoundTenantServer's, on a config copied from a
// tenant's pool).
func BoundMessages(cfg *pgconn.Config) {
	boundWith(cfg, platformLimits)
}

// boundWith bounds cfg's connections with lim.
func boundWith(cfg *pgconn.Config, lim *messageLimits) {
	if cfg.MaxProtocolMessageBodyLen <= 0 || cfg.MaxProtocolMessageBodyLen > lim.message {
		cfg.MaxProtocolMessageBodyLen = lim.message
	}
	next := cfg.AfterNetConnect
	cfg.AfterNetConnect = func(ctx context.Context, c *pgconn.Config, conn net.Conn) (net.Conn, error) {
		if next != nil {
			var err error
			if conn, err = next(ctx, c, conn); err != nil {
				return nil, err
			}
		}
		// Bound once: a config bounded for a tenant's server and then by
		// BoundMessages keeps the tenant's (smaller) bounds in one
		// wrapper, which withRefusal then reads for the reason.
		if inner, ok := conn.(*answerBound); ok {
			if inner.lim.answer <= lim.answer {
				return inner, nil
			}
			conn = inner.Conn
		}
		return &answerBound{Conn: conn, limit: lim.answer, lim: lim}, nil
	}
}

// What pgx keeps of a connection beyond one answer, bounded per
// connection (issue 26's eighth review, HIGH 1: a tenant's server held
// 601 MiB of the operator's heap in 2.7 s with notifications, 555 MiB
// with ParameterStatus messages of new names, and 163 MiB with padded
// column names in pgx's statement cache).
const (
	// maxParameterNames: the distinct names of ParameterStatus of one
	// connection (pgconn keeps the last value of each). PostgreSQL 17
	// reports 15; Citus and extensions add few. Counted by name, not by
	// message: an honest server re-sends is_superuser at every SET ROLE,
	// and a lifetime count of 64 KiB refused an honest pooled connection
	// after about 94 first provisionings (issue 26's ninth review, L1).
	maxParameterNames = 64
	// maxParameterStatus: one ParameterStatus message (a name and a
	// setting's value: an honest server's are under 100 bytes, a long
	// search_path a few hundred).
	maxParameterStatus = 4 << 10
	// maxRowDescription: one RowDescription (the operator's widest
	// statements have a dozen columns of short names: under 1 KiB).
	maxRowDescription = 64 << 10
	// maxBackendKeyData: BackendKeyData, the process id and the secret
	// key pgconn keeps for the connection's life: 4 bytes in protocol
	// 3.0, at most 256 in 3.2. pgx took 8 MiB, and 16 connections to a
	// tenant's server kept 129 MiB (issue 26's ninth review, MEDIUM 1).
	maxBackendKeyData = 4 + 256
	// maxSmallMessage: every other message the operator reads (the
	// authentication exchange, ReadyForQuery, CommandComplete, the
	// parse/bind/close acknowledgements, ParameterDescription, which
	// pgx's statement cache keeps, and the rest) is small on an honest
	// server; only rows, errors, notices and copy data ('D', 'E', 'N',
	// 'd') are large, and pgx keeps none of them past the answer, which
	// MaxServerAnswer bounds.
	maxSmallMessage = 64 << 10
)

// messageLimits are the bounds of one connection's messages by type.
type messageLimits struct {
	message                                int    // MaxProtocolMessageBodyLen
	answer                                 int64  // bytes between two writes
	parameterStatus, rowDescription, small uint32 // see the constants above
}

// platformLimits: a connection to a server of the platform team's.
var platformLimits = &messageLimits{message: MaxServerMessage, answer: MaxServerAnswer, parameterStatus: maxParameterStatus,
	rowDescription: maxRowDescription, small: maxSmallMessage}

// ErrServerMessageRefused: a server sent what the operator never asks for
// (a notification: it listens on no channel) or more of what pgx keeps
// than the operator ever needs; the operator closed the connection.
var ErrServerMessageRefused = errors.New("the server sent a message the operator does not keep")

// answerBound is the connection as pgconn sees it, after TLS: every write
// (a statement, a batch, a Sync) starts a new answer, and an answer that
// reads past limit closes the connection. Above TLS, so a server cannot
// make it write (a TLS key update) to restart the count. It also follows
// the server's messages (type byte, length) and closes the connection on
// what pgx would keep beyond the answer (admit). It remembers why it
// closed the connection (refusal): pgx reports the read error to the
// statement that met it, and "conn closed" to the ones after.
type answerBound struct {
	net.Conn
	limit int64
	lim   *messageLimits
	read  atomic.Int64 // bytes read since the last write

	// The message framing, touched by the one goroutine that reads.
	header   [5]byte
	headerN  int
	bodyLeft uint32
	// The body of a message admit wants to see whole (kept, of type
	// keeping; at most maxSmallMessage), and the ParameterStatus names
	// seen.
	kept       []byte
	keeping    byte
	paramNames map[string]struct{}

	mu  sync.Mutex
	err error // why the connection was closed
}

func (c *answerBound) Write(p []byte) (int, error) {
	c.read.Store(0)
	return c.Conn.Write(p)
}

func (c *answerBound) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.read.Add(int64(n)) > c.limit {
		return 0, c.refuse(fmt.Errorf("%w (%d MiB)", ErrServerAnswerTooLarge, c.limit>>20))
	}
	if ferr := c.follow(p[:n]); ferr != nil {
		return 0, c.refuse(ferr)
	}
	return n, err
}

// refuse closes the connection, remembers why and returns it.
func (c *answerBound) refuse(err error) error {
	_ = c.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	return c.err
}

// refusal is why the connection was closed; nil while it is open, or when
// something else closed it.
func (c *answerBound) refusal() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// follow walks the message headers in b, which continues the stream.
func (c *answerBound) follow(b []byte) error {
	for len(b) > 0 {
		if c.bodyLeft > 0 {
			skip := min(uint32(len(b)), c.bodyLeft)
			if c.keeping != 0 {
				c.kept = append(c.kept, b[:skip]...)
			}
			c.bodyLeft -= skip
			b = b[skip:]
			if err := c.bodyEnd(); err != nil {
				return err
			}
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
		if err := c.bodyEnd(); err != nil { // an empty body
			return err
		}
	}
	return nil
}

// admit checks one message by its type and body length.
func (c *answerBound) admit(typ byte, body uint32) error {
	switch typ {
	case 'D', 'E', 'N', 'd': // rows, errors, notices, copy data: bounded by the answer
		return nil
	case 'A': // NotificationResponse
		return fmt.Errorf("%w: a notification (the operator listens on no channel)", ErrServerMessageRefused)
	case 'S': // ParameterStatus
		if body > c.lim.parameterStatus {
			return fmt.Errorf("%w: a ParameterStatus of %d bytes (at most %d)", ErrServerMessageRefused, body, c.lim.parameterStatus)
		}
		c.keeping, c.kept = typ, c.kept[:0]
	case 'T': // RowDescription
		if body > c.lim.rowDescription {
			return fmt.Errorf("%w: a row description of %d KiB (at most %d)", ErrServerMessageRefused, body>>10, c.lim.rowDescription>>10)
		}
	case 'K': // BackendKeyData
		if body > maxBackendKeyData {
			return fmt.Errorf("%w: a BackendKeyData of %d bytes (at most %d)", ErrServerMessageRefused, body, maxBackendKeyData)
		}
	default:
		if body > c.lim.small {
			return fmt.Errorf("%w: a message of type %q of %d KiB (at most %d)", ErrServerMessageRefused, typ, body>>10, c.lim.small>>10)
		}
		if typ == 'R' { // authentication: the SCRAM iterations are in it
			c.keeping, c.kept = typ, c.kept[:0]
		}
	}
	return nil
}

// bodyEnd checks a kept body once it is all read.
func (c *answerBound) bodyEnd() error {
	if c.keeping == 0 || c.bodyLeft > 0 {
		return nil
	}
	typ := c.keeping
	c.keeping = 0
	if typ == 'R' {
		err := checkSCRAMIterations(c.kept)
		c.kept = nil // authentication is over soon: keep no buffer of up to maxSmallMessage
		return err
	}
	return c.paramName(c.kept)
}

// paramName counts the name of a ParameterStatus.
func (c *answerBound) paramName(body []byte) error {
	name, _, _ := bytes.Cut(body, []byte{0})
	if _, seen := c.paramNames[string(name)]; seen {
		return nil
	}
	if len(c.paramNames) == maxParameterNames {
		return fmt.Errorf("%w: ParameterStatus of more than %d names", ErrServerMessageRefused, maxParameterNames)
	}
	if c.paramNames == nil {
		c.paramNames = map[string]struct{}{}
	}
	c.paramNames[string(name)] = struct{}{}
	return nil
}

// maxSCRAMIterations bounds the iteration count a server asks of SCRAM
// (PostgreSQL's scram_iterations, 4,096 by default). pgx computes the
// PBKDF2 of the password with it before it looks at a deadline and takes
// up to 10,000,000: 2.4 s of one core a connection, and a tenant's server
// can ask it at every connection (issue 26's ninth review, L3).
const maxSCRAMIterations = 100_000

// checkSCRAMIterations refuses an AuthenticationSASLContinue (an 'R' of type
// 11) whose server-first-message asks more than maxSCRAMIterations.
func checkSCRAMIterations(body []byte) error {
	if len(body) < 4 || binary.BigEndian.Uint32(body) != 11 {
		return nil
	}
	for attr := range strings.SplitSeq(string(body[4:]), ",") {
		v, ok := strings.CutPrefix(attr, "i=")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(v); err != nil || n > maxSCRAMIterations {
			return fmt.Errorf("%w: SCRAM with %s iterations (at most %d)", ErrServerMessageRefused, cutForError(v), maxSCRAMIterations)
		}
	}
	return nil
}

// cutForError is s, or its first 32 bytes and "…".
func cutForError(s string) string {
	if len(s) <= 32 {
		return s
	}
	return s[:32] + "…"
}

// withRefusal adds to err, when conn's answer bound closed it, why: the
// statements after the one that met the refusal see "conn closed" only.
func withRefusal(conn *pgx.Conn, err error) error {
	if err == nil || errors.Is(err, ErrServerMessageRefused) || errors.Is(err, ErrServerAnswerTooLarge) {
		return err
	}
	b, ok := conn.PgConn().Conn().(*answerBound)
	if !ok {
		return err
	}
	if why := b.refusal(); why != nil {
		return fmt.Errorf("%w (the operator closed the connection: %w)", err, why)
	}
	return err
}
