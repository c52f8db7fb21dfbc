package core

import "regexp"

// toolRef is a tool name or a tool-call id: what model APIs generate
// (call_abc123, toolu_01..., get_weather), never free text. An append and
// an import hold messages to it.
var toolRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}$`)

// ToolRefRule is the message of a tool name or call id that is not one.
const ToolRefRule = "must be 1-128 characters of letters, digits and . _ : -, starting with a letter or digit"

// ValidToolRef reports whether s is a tool name or tool-call id.
func ValidToolRef(s string) bool { return toolRef.MatchString(s) }
