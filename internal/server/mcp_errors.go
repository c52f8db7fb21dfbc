package server

import (
	"strconv"
	"strings"
)

// toolErrorText is a problem as a tool error's text. A tool result has no
// errors member and its structured content must fit the tool's output
// schema, so the text lists every invalid field with its message, one per
// line (a REST client reads the same list in the problem's errors).
func toolErrorText(p *Problem) string {
	if len(p.Errors) < 2 {
		return p.Title + ": " + p.Detail
	}
	var b strings.Builder
	b.WriteString(p.Title + ": " + strconv.Itoa(len(p.Errors)) + " fields are invalid:")
	for _, f := range p.Errors {
		b.WriteString("\n- " + f.Field + ": " + f.Message)
	}
	return b.String()
}
