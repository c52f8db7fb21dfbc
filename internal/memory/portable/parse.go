package portable

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
)

// maxLineErrors is how many invalid fields an import reports before it
// stops reading: enough to fix a file, bounded for a file of garbage.
const maxLineErrors = 100

// record is one data line read: its number, kind, decoded value and
// whether its vector must be computed on the way in.
type record struct {
	line  int
	kind  string
	value any
	embed bool
}

// ownerRecords are the records of one owner, by kind, in file order.
type ownerRecords struct {
	owner  string
	byKind map[string][]record
}

// parsed is a whole import body, validated.
type parsed struct {
	owners []*ownerRecords
	lines  int
	parts  int
	counts map[string]int64
}

// parser reads the lines of a body: parts of header, records and
// checkpoints, and trailer, each part's checksum and counts checked.
type parser struct {
	target Embedder
	check  checker
	out    parsed
	byOwn  map[string]*ownerRecords
	seen   map[[32]byte]bool // SHA-256 of the lines already read, with their owner (parts may overlap)
	// The part being read (header nil: between parts).
	header *Header
	start  int
	sum    hash.Hash
	lines  int64
	counts map[string]int64
	reuse  bool // the part's vectors are the target embedder's
}

// parse validates body; errors are a ValidationError naming lines[N].field.
func (p *parser) parse(body []byte) (*parsed, error) {
	p.out.counts, p.byOwn, p.seen = zeroCounts(), map[string]*ownerRecords{}, map[[32]byte]bool{}
	n := 0
	for len(body) > 0 && p.check.fe.Len() < maxLineErrors {
		n++
		i := bytes.IndexByte(body, '\n')
		line := body
		if i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		p.line(n, bytes.TrimSuffix(line, []byte{'\r'}))
	}
	p.out.lines = n
	if p.header != nil && p.check.fe.Len() == 0 {
		p.at(n+1).add("kind", "the part that starts at line %d has no trailer: the export was cut; "+
			"resume it from its last checkpoint (?after=) and send the parts whole", p.start)
	}
	if n == 0 {
		p.at(1).add("kind", "the body is empty: an import starts with a header line")
	}
	if p.check.fe.Len() == 0 {
		for _, g := range p.out.owners {
			p.check.checkSessions(g, p.at)
		}
	}
	if err := p.check.fe.Err(); err != nil {
		return nil, err
	}
	return &p.out, nil
}

// at is the checker of line n.
func (p *parser) at(n int) checker {
	c := p.check
	c.fe.Prefix = fmt.Sprintf("lines[%d].", n)
	return c
}

func (p *parser) line(n int, line []byte) {
	c := p.at(n)
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil {
		c.add("kind", "the line is not a JSON object: %s", jsonMessage(err))
		return
	}
	switch {
	case env.Kind == KindHeader:
		p.beginPart(n, line, c)
	case p.header == nil:
		c.add("kind", "%q outside a part: a part starts with a header line", env.Kind)
	case env.Kind == KindTrailer:
		p.endPart(line, c)
	default:
		p.sum.Write(line)
		p.sum.Write([]byte{'\n'})
		p.lines++
		p.data(n, env, line, c)
	}
}

// beginPart reads a header.
func (p *parser) beginPart(n int, line []byte, c checker) {
	if p.header != nil {
		c.add("kind", "a header inside the part that starts at line %d (its trailer is missing)", p.start)
		return
	}
	var h Header
	if !decodeStrict(line, &h, c) {
		return
	}
	if h.FormatVersion != FormatVersion {
		c.add("formatVersion", "%d is not a format this service reads (%d)", h.FormatVersion, FormatVersion)
	}
	c.oneOf("scope", h.Scope, "tenant", "owner")
	if h.Scope == "owner" {
		c.owner(h.Owner)
	}
	p.header, p.start, p.sum, p.lines, p.counts = &h, n, sha256.New(), 0, zeroCounts()
	p.sum.Write(line)
	p.sum.Write([]byte{'\n'})
	p.lines++
	p.reuse = h.Vectors && h.Embedder == p.target
	p.out.parts++
}

// endPart reads a trailer and checks it against the part.
func (p *parser) endPart(line []byte, c checker) {
	var t Trailer
	defer func() { p.header = nil }()
	if !decodeStrict(line, &t, c) {
		return
	}
	if got := hex.EncodeToString(p.sum.Sum(nil)); t.SHA256 != got {
		c.add("sha256", "does not match the part's lines (SHA-256 %s): the part was changed or cut", got)
	}
	if t.Lines != p.lines {
		c.add("lines", "is %d but the part has %d lines before its trailer", t.Lines, p.lines)
	}
	for _, k := range RecordKinds {
		if t.Counts[k] != p.counts[k] {
			c.add("counts."+k, "is %d but the part holds %d", t.Counts[k], p.counts[k])
		}
	}
}

// data reads one record (or checkpoint) of the part.
func (p *parser) data(n int, env envelope, line []byte, c checker) {
	if env.Kind == KindCheckpoint {
		var cp Checkpoint
		decodeStrict(line, &cp, c)
		return
	}
	r := record{line: n, kind: env.Kind}
	if !p.decodeRecord(&r, line, c) {
		return
	}
	p.counts[env.Kind]++
	c.owner(env.Owner)
	if p.header.Scope == "owner" && env.Owner != p.header.Owner {
		c.add("owner", "%q is not the owner of this part's header (%q)", env.Owner, p.header.Owner)
	}
	key := sha256.Sum256(append([]byte(env.Owner+"\x00"), line...))
	if p.seen[key] {
		return // a page a resumed export sent again
	}
	p.seen[key] = true
	p.out.counts[env.Kind]++
	g := p.byOwn[env.Owner]
	if g == nil {
		g = &ownerRecords{owner: env.Owner, byKind: map[string][]record{}}
		p.byOwn[env.Owner] = g
		p.out.owners = append(p.out.owners, g)
	}
	g.byKind[env.Kind] = append(g.byKind[env.Kind], r)
}

// decodeRecord decodes and validates a record of kind r.kind.
func (p *parser) decodeRecord(r *record, line []byte, c checker) bool {
	dims := p.target.Dimensions
	switch r.kind {
	case KindSession:
		return decodeAs(r, line, c, c.session, nil)
	case KindMessage:
		return decodeAs(r, line, c, c.message, func(v *messageRec) bool {
			return p.vectorIn(&v.Embedding, c, dims) && v.Content != ""
		})
	case KindSummary:
		return decodeAs(r, line, c, c.summary, func(v *summaryRec) bool { return p.vectorIn(&v.Embedding, c, dims) })
	case KindSummarySource:
		return decodeAs(r, line, c, c.summarySource, nil)
	case KindEpisode:
		return decodeAs(r, line, c, c.episode, func(v *episodeRec) bool { return p.vectorIn(&v.Embedding, c, dims) })
	case KindDocument:
		return decodeAs(r, line, c, c.document, nil)
	case KindDocumentChange:
		return decodeAs(r, line, c, c.documentChange, nil)
	case KindMemory:
		return decodeAs(r, line, c, func(v *memoryRec) { c.memory(v); c.globalScope(v) }, func(v *memoryRec) bool {
			return p.vectorIn(&v.Embedding, c, dims) || v.Embedding == nil
		})
	case KindHistory:
		return decodeAs(r, line, c, c.history, nil)
	default:
		c.add("kind", "%q is not a record kind (%v, checkpoint)", r.kind, RecordKinds)
		return false
	}
}

// decodeAs decodes line into a new T, the value of r whether it decodes
// or not; a T that decodes is validated by check, then embed (nil: the
// kind has no vector) decides whether its vector is computed on the way in.
func decodeAs[T any](r *record, line []byte, c checker, check func(*T), embed func(*T) bool) bool {
	v := new(T)
	r.value = v
	if !decodeStrict(line, v, c) {
		return false
	}
	check(v)
	if embed != nil {
		r.embed = embed(v)
	}
	return true
}

// vectorIn decides about a record's vector: kept when the part's vectors
// are the target embedder's (and then checked), else dropped. It reports
// whether the vector must be computed on the way in.
func (p *parser) vectorIn(v *[]float32, c checker, dims int) bool {
	if p.reuse {
		c.vector(*v, dims)
		return false
	}
	*v = nil
	return true
}

// decodeStrict decodes line into v, refusing unknown fields.
func decodeStrict(line []byte, v any, c checker) bool {
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		c.add(fieldOf(err), "%s", jsonMessage(err))
		return false
	}
	if d.More() {
		c.add("kind", "one JSON object a line")
		return false
	}
	return true
}

// fieldOf names the field a decoding error is about, when it says.
func fieldOf(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" { //nolint:errorlint // decoder errors are not wrapped
		return te.Field
	}
	msg := err.Error()
	if i := bytes.Index([]byte(msg), []byte(`unknown field "`)); i >= 0 {
		rest := msg[i+len(`unknown field "`):]
		if j := bytes.IndexByte([]byte(rest), '"'); j >= 0 {
			return rest[:j]
		}
	}
	return "kind"
}

func jsonMessage(err error) string { return err.Error() }
