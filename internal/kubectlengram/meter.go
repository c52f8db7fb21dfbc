package kubectlengram

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// meter draws a transfer's progress on stderr when it is a terminal: a bar
// and a percentage when the total is known (an export's header counts the
// records of its snapshot; an import from a file knows its size), the
// count alone otherwise (an import from a pipe). It redraws at most ten
// times a second, so a transfer of millions of lines writes a few hundred.
type meter struct {
	a     *app
	unit  string
	total int64 // 0: unknown
	last  time.Time
	note  string // after the figures, e.g. "3 owners written"
}

// meterEvery is the least time between two redraws.
const meterEvery = 100 * time.Millisecond

// show draws done, unless the last redraw was less than meterEvery ago
// and force is not set (the end of a part or request).
func (m *meter) show(done int64, force bool) {
	now := time.Now()
	if !force && now.Sub(m.last) < meterEvery {
		return
	}
	m.last = now
	line := meterLine(done, m.total, m.unit)
	if m.note != "" {
		line += ", " + m.note
	}
	m.a.progress("%s", line)
}

// meterWidth is the bar's width in characters.
const meterWidth = 30

// meterLine is "[#########.....................]  30%  3,000 of 10,000
// records", or "3,000 records" when total is unknown. done past total
// (rows written after the export's snapshot was counted) shows 100 %.
func meterLine(done, total int64, unit string) string {
	if total <= 0 {
		return grouped(done) + " " + unit
	}
	shown := min(done, total)
	fill := int(shown * meterWidth / total)
	return fmt.Sprintf("[%s%s] %3d%%  %s of %s %s", strings.Repeat("#", fill), strings.Repeat(".", meterWidth-fill),
		shown*100/total, grouped(done), grouped(total), unit)
}

// grouped is n with thousands separated by commas.
func grouped(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + grouped(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// countingReader counts the bytes read through it and shows them on a meter.
type countingReader struct {
	r io.Reader
	n int64
	m *meter
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.m.show(c.n, false)
	return n, err
}

// inputSize is the size of in when it is a regular file, else 0 (unknown).
func inputSize(in io.Reader) int64 {
	f, ok := in.(*os.File)
	if !ok {
		return 0
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0
	}
	return st.Size()
}

// progress writes a line on stderr when it is a terminal, over the last.
// On anything else (a file, a pipe, a CI log) it writes nothing: the
// summary at the end is the whole report.
func (a *app) progress(format string, args ...any) {
	terminal := a.terminal
	if terminal == nil {
		terminal = isTerminal
	}
	if terminal(a.errOut) {
		fmt.Fprintf(a.errOut, "\r"+format+"\x1b[K", args...)
	}
}

// isTerminal is whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
