package workload

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// NewHandler returns the slog handler of every process of the binary
// (operator, service, job) writing to w. level is debug, info, warn or
// error; format is json (the default: one object a line, for log
// pipelines) or text (for people at a terminal).
func NewHandler(w io.Writer, level, format string) (slog.Handler, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(strings.TrimSpace(level))); err != nil {
		return nil, fmt.Errorf("invalid --log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(strings.TrimSpace(format)) {
	case "", "json":
		return slog.NewJSONHandler(w, opts), nil
	case "text":
		return slog.NewTextHandler(w, opts), nil
	default:
		return nil, fmt.Errorf("invalid --log-format %q: want json or text", format)
	}
}

// NewLogger is a slog logger over NewHandler.
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	h, err := NewHandler(w, level, format)
	if err != nil {
		return nil, err
	}
	return slog.New(h), nil
}
