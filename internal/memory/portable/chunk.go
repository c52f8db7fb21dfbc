package portable

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
)

// MaxLineBytes bounds one line a reader of an export accepts: a record is
// at most a few contents and one vector (4,096 dimensions).
const MaxLineBytes = 16 << 20

// Chunk reads an export file and calls send with import bodies of
// at most max bytes, each made of whole owners: the part's header, the
// owners' records, and a trailer recomputed for them (the format lets an
// import body be any parts, each header to trailer). Each part of the
// file is checked against its own trailer first, so a damaged file is
// refused here rather than half sent; checkpoint lines are left out.
func Chunk(r io.Reader, max int64, send func([]byte) error) error {
	c := &chunker{max: max, send: send}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	for sc.Scan() {
		c.n++
		if err := c.line(sc.Bytes()); err != nil {
			return fmt.Errorf("line %d: %w", c.n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the export: %w", err)
	}
	if c.header != nil {
		return errors.New("the file ends inside a part (no trailer): the export was cut; export again")
	}
	if c.n == 0 {
		return errors.New("the file is empty")
	}
	return nil
}

type chunker struct {
	max  int64
	send func([]byte) error
	n    int // lines read

	header []byte    // the part's header (nil: between parts)
	sum    hash.Hash // of the part's lines as the file holds them
	lines  int64

	owner    string
	ownerBuf bytes.Buffer // the current owner's records
	chunk    bytes.Buffer // whole owners waiting to be sent
}

func (c *chunker) line(b []byte) error {
	var env struct{ Kind, Owner string }
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("not a JSON object: %w", err)
	}
	switch {
	case env.Kind == KindHeader:
		if c.header != nil {
			return errors.New("a header inside a part (the trailer before it is missing)")
		}
		c.header, c.sum, c.lines = append([]byte(nil), b...), sha256.New(), 0
		c.hash(b)
		return nil
	case c.header == nil:
		return fmt.Errorf("%q outside a part: a part starts with a header", env.Kind)
	case env.Kind == KindTrailer:
		return c.endPart(b)
	}
	c.hash(b)
	if env.Kind == KindCheckpoint {
		return nil
	}
	if env.Owner != c.owner {
		if err := c.endOwner(); err != nil {
			return err
		}
		c.owner = env.Owner
	}
	c.ownerBuf.Write(b)
	c.ownerBuf.WriteByte('\n')
	return nil
}

func (c *chunker) hash(b []byte) {
	c.sum.Write(b)
	c.sum.Write([]byte{'\n'})
	c.lines++
}

// endOwner moves the current owner into the chunk, sending the chunk
// first when the owner would not fit beside it.
func (c *chunker) endOwner() error {
	if c.ownerBuf.Len() == 0 {
		return nil
	}
	room := c.max - int64(len(c.header)) - 1024 // the header and the trailer
	if int64(c.chunk.Len()+c.ownerBuf.Len()) > room && c.chunk.Len() > 0 {
		if err := c.flush(); err != nil {
			return err
		}
	}
	if int64(c.ownerBuf.Len()) > room {
		return fmt.Errorf("the records of owner %q are %d bytes, more than the %d bytes a request may hold (an owner is imported in one request)", c.owner, c.ownerBuf.Len(), c.max)
	}
	c.chunk.Write(c.ownerBuf.Bytes())
	c.ownerBuf.Reset()
	return nil
}

// endPart checks the part against its trailer and sends what remains.
func (c *chunker) endPart(b []byte) error {
	var t Trailer
	if err := json.Unmarshal(b, &t); err != nil {
		return fmt.Errorf("trailer: %w", err)
	}
	if got := hex.EncodeToString(c.sum.Sum(nil)); got != t.SHA256 || t.Lines != c.lines {
		return fmt.Errorf("the part ending here does not match its trailer (SHA-256 %s over %d lines, the trailer says %s over %d): the file was changed or damaged", got, c.lines, t.SHA256, t.Lines)
	}
	if err := c.endOwner(); err != nil {
		return err
	}
	err := c.flush()
	c.header, c.owner = nil, ""
	return err
}

// flush sends the chunk as one body: header, records, a new trailer.
func (c *chunker) flush() error {
	if c.chunk.Len() == 0 {
		return nil
	}
	var body bytes.Buffer
	sum := sha256.New()
	counts := map[string]int64{}
	for _, k := range RecordKinds {
		counts[k] = 0
	}
	lines := int64(0)
	for _, l := range append([][]byte{c.header}, bytes.Split(bytes.TrimSuffix(c.chunk.Bytes(), []byte{'\n'}), []byte{'\n'})...) {
		body.Write(l)
		body.WriteByte('\n')
		sum.Write(l)
		sum.Write([]byte{'\n'})
		lines++
		var env struct{ Kind string }
		_ = json.Unmarshal(l, &env)
		if _, ok := counts[env.Kind]; ok {
			counts[env.Kind]++
		}
	}
	tr, err := json.Marshal(Trailer{Kind: KindTrailer, Counts: counts, Lines: lines,
		SHA256: hex.EncodeToString(sum.Sum(nil)), Complete: true})
	if err != nil {
		return fmt.Errorf("encoding a trailer: %w", err)
	}
	body.Write(tr)
	body.WriteByte('\n')
	c.chunk.Reset()
	return c.send(body.Bytes())
}
