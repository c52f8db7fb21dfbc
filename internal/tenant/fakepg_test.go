package tenant

// A fake PostgreSQL on 127.0.0.1 (first written by issue 26's seventh review) that
// speaks enough of the protocol (startup, simple and extended query) to
// answer the operator's statements with whatever a test decides: a server
// a tenant runs, hostile.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/engram-dev/engram/internal/testenv"
)

// fakeCol is one result column: its name and type OID (25 text, 16 bool,
// 23 int4, 26 oid).
type fakeCol struct {
	name string
	oid  uint32
}

// fakeAnswer is the server's answer to one statement: its columns and a
// function that writes its rows with emit (values already in text form;
// binary form is derived per type). emit returns false once the client is
// gone.
// lockSettingsAnswer answers tableSizeSQL: a lock table of about 6400
// entries, and 128 (twice max_locks_per_transaction).
var lockSettingsAnswer = fakeAnswer{cols: []fakeCol{{"a", 23}, {"b", 23}}, rows: func(emit func(...string) bool) { emit("6400", "128") }}

// rolesAnswer answers a listing of marked roles (oid, rolname,
// rolconnlimit, comment) with the rows rows emits.
func rolesAnswer(rows func(emit func(...string) bool)) fakeAnswer {
	return fakeAnswer{cols: []fakeCol{{"oid", 26}, {"rolname", 25}, {"rolconnlimit", 23}, {"c", 25}}, rows: rows}
}

// watchdogAnswer answers the lock watchdog's statements as a server whose
// marked roles roles emits, each with one session, none holding locks; ok
// is false for any other statement.
func watchdogAnswer(q string, roles func(emit func(...string) bool)) (a fakeAnswer, ok bool) {
	switch {
	case strings.Contains(q, "max_locks_per_transaction"):
		return lockSettingsAnswer, true
	case strings.Contains(q, "FROM pg_roles r"):
		return rolesAnswer(roles), true
	case strings.Contains(q, "count(pg_get_userbyid"):
		return fakeAnswer{cols: []fakeCol{{"count", 23}}, rows: func(emit func(...string) bool) { emit("1") }}, true
	case strings.Contains(q, "pg_lock_status()"):
		return fakeAnswer{cols: locksCols}, true
	}
	return fakeAnswer{}, false
}

// citusAnswer answers DetectCitus as a Citus 13.0 coordinator whose
// pg_dist_node lists the workers nodes emits (name, port); ok is false for
// any other statement.
func citusAnswer(q string, nodes func(emit func(...string) bool)) (a fakeAnswer, ok bool) {
	switch {
	case strings.Contains(q, "FROM pg_extension WHERE extname = 'citus'"):
		return fakeAnswer{cols: []fakeCol{{"extversion", 25}}, rows: func(emit func(...string) bool) { emit("13.0") }}, true
	case strings.Contains(q, "pg_dist_local_group"):
		return fakeAnswer{cols: []fakeCol{{"c", 16}}, rows: func(emit func(...string) bool) { emit("t") }}, true
	case strings.Contains(q, "FROM pg_dist_node"):
		return fakeAnswer{cols: []fakeCol{{"nodename", 25}, {"nodeport", 23}}, rows: nodes}, true
	}
	return fakeAnswer{}, false
}

// locksCols are locksSQL's columns.
var locksCols = []fakeCol{{"pid", 23}, {"usesysid", 26}, {"count", 23}}

type fakeAnswer struct {
	cols []fakeCol
	rows func(emit func(vals ...string) bool)
}

// fakePG serves answer(query) for every statement; it logs anyone in.
func fakePG(t *testing.T, answer func(query string) fakeAnswer) string {
	addr := testenv.ServeLocal(t, func(c net.Conn) { serveFake(c, answer) })
	return fmt.Sprintf("postgres://evil:pw@%s/engram?sslmode=disable", addr)
}

func serveFake(c net.Conn, answer func(string) fakeAnswer) {
	defer c.Close()
	r := bufio.NewReader(c)
	w := bufio.NewWriterSize(c, 1<<20)
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if _, err := io.CopyN(io.Discard, r, int64(n)-8); err != nil {
		return
	}
	if binary.BigEndian.Uint32(hdr[4:]) != 196608 { // SSL or cancel request
		return
	}
	_, _ = w.Write([]byte{'R', 0, 0, 0, 8, 0, 0, 0, 0, 'K', 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 2, 'Z', 0, 0, 0, 5, 'I'})
	w.Flush()
	stmts := map[string]string{}   // statement name → query
	portals := map[string]string{} // portal name → query
	formats := map[string][]int16{}
	for {
		typ, err := r.ReadByte()
		if err != nil {
			return
		}
		var lb [4]byte
		if _, err := io.ReadFull(r, lb[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(lb[:])-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		switch typ {
		case 'P':
			name, rest := cstr(body)
			q, _ := cstr(rest)
			stmts[name] = q
			msg(w, '1', nil)
		case 'D':
			name, _ := cstr(body[1:])
			if body[0] == 'S' {
				msg(w, 't', paramDescription(stmts[name]))
				rowDesc(w, answer(stmts[name]).cols, nil)
			} else {
				rowDesc(w, answer(portals[name]).cols, formats[name])
			}
		case 'B':
			portal, rest := cstr(body)
			stmt, rest := cstr(rest)
			nf := int(binary.BigEndian.Uint16(rest))
			rest = rest[2+2*nf:]
			np := int(binary.BigEndian.Uint16(rest))
			rest = rest[2:]
			for range np {
				l := int32(binary.BigEndian.Uint32(rest))
				rest = rest[4:]
				if l > 0 {
					rest = rest[l:]
				}
			}
			nr := int(binary.BigEndian.Uint16(rest))
			rest = rest[2:]
			fs := make([]int16, nr)
			for i := range nr {
				fs[i] = int16(binary.BigEndian.Uint16(rest[2*i:]))
			}
			portals[portal], formats[portal] = stmts[stmt], fs
			msg(w, '2', nil)
		case 'E':
			portal, _ := cstr(body)
			if !runRows(w, answer(portals[portal]), formats[portal]) {
				return
			}
		case 'Q':
			q, _ := cstr(body)
			a := answer(q)
			if len(a.cols) > 0 {
				rowDesc(w, a.cols, nil)
			}
			if !runRows(w, a, nil) {
				return
			}
			msg(w, 'Z', []byte{'I'})
		case 'S':
			msg(w, 'Z', []byte{'I'})
		case 'C':
			msg(w, '3', nil)
		case 'X':
			return
		}
		if typ == 'S' || typ == 'Q' || typ == 'H' {
			if w.Flush() != nil {
				return
			}
		}
	}
}

// paramDescription describes the $n of q: one type OID each (oid[],
// oid, int4 by the cast that follows it; text else), as pgx needs to
// encode its arguments.
func paramDescription(q string) []byte {
	var oids []byte
	n := 0
	for i := 1; i < 10 && strings.Contains(q, fmt.Sprintf("$%d", i)); i++ {
		n++
		oid := uint32(25)
		switch {
		case strings.Contains(q, fmt.Sprintf("$%d::oid[]", i)):
			oid = 1028
		case strings.Contains(q, fmt.Sprintf("$%d::oid", i)):
			oid = 26
		case strings.Contains(q, fmt.Sprintf("$%d::int", i)):
			oid = 23
		}
		oids = binary.BigEndian.AppendUint32(oids, oid)
	}
	return append(binary.BigEndian.AppendUint16(nil, uint16(n)), oids...)
}

func cstr(b []byte) (string, []byte) {
	i := strings.IndexByte(string(b), 0)
	return string(b[:i]), b[i+1:]
}

func msg(w *bufio.Writer, typ byte, body []byte) error {
	var h [5]byte
	h[0] = typ
	binary.BigEndian.PutUint32(h[1:], uint32(len(body)+4))
	_, _ = w.Write(h[:])
	_, err := w.Write(body)
	return err
}

func rowDesc(w *bufio.Writer, cols []fakeCol, fs []int16) {
	if len(cols) == 0 {
		msg(w, 'n', nil)
		return
	}
	b := binary.BigEndian.AppendUint16(nil, uint16(len(cols)))
	for i, c := range cols {
		b = append(b, c.name...)
		b = append(b, 0)
		b = binary.BigEndian.AppendUint32(b, 0)
		b = binary.BigEndian.AppendUint16(b, 0)
		b = binary.BigEndian.AppendUint32(b, c.oid)
		b = binary.BigEndian.AppendUint16(b, 0xffff)
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
		b = binary.BigEndian.AppendUint16(b, uint16(format(fs, i)))
	}
	msg(w, 'T', b)
}

func format(fs []int16, i int) int16 {
	switch {
	case len(fs) == 1:
		return fs[0]
	case i < len(fs):
		return fs[i]
	}
	return 0
}

// runRows writes a's rows and CommandComplete; false when the client is gone.
func runRows(w *bufio.Writer, a fakeAnswer, fs []int16) bool {
	alive, count := true, 0
	if a.rows != nil {
		a.rows(func(vals ...string) bool {
			b := binary.BigEndian.AppendUint16(nil, uint16(len(vals)))
			for i, v := range vals {
				enc := []byte(v)
				if format(fs, i) == 1 {
					switch a.cols[i].oid {
					case 16:
						enc = []byte{0}
						if v == "t" {
							enc = []byte{1}
						}
					case 23:
						var x int32
						_, _ = fmt.Sscan(v, &x)
						enc = binary.BigEndian.AppendUint32(nil, uint32(x))
					case 26:
						var x uint32
						_, _ = fmt.Sscan(v, &x)
						enc = binary.BigEndian.AppendUint32(nil, x)
					}
				}
				b = binary.BigEndian.AppendUint32(b, uint32(len(enc)))
				b = append(b, enc...)
			}
			if msg(w, 'D', b) != nil {
				alive = false
			}
			count++
			return alive
		})
	}
	msg(w, 'C', []byte(fmt.Sprintf("SELECT %d\x00", count)))
	return alive
}
