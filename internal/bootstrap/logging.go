package bootstrap

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// NewLogger returns a slog logger writing to w. level is debug, info, warn or
// error; format is json (the default: one object a line, for log pipelines)
// or text (for people at a terminal).
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.TrimSpace(level))); err != nil {
		return nil, fmt.Errorf("invalid log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(strings.TrimSpace(format)) {
	case "", "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("invalid log format %q: want json or text", format)
	}
}
