package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// Tokens holds the bearer tokens that are valid right now and reloads them
// from a file. The operator mounts the <runtime>-api-token Secret there; the
// kubelet swaps the file when the Secret changes, so polling its content is
// the one method that works for every volume type (inotify misses the
// symlink swap of projected volumes).
type Tokens struct {
	path    string
	logger  *slog.Logger
	current atomic.Pointer[tokenSet]
	// raw is the last content read, to log changes only once.
	raw     []byte
	loaded  bool
	rawErr  string
	metrics *Metrics
}

// tokenSet is the SHA-256 of each valid token. Comparing digests makes every
// comparison the same length, so timing reveals neither a token nor its size.
type tokenSet struct{ digests [][32]byte }

// NewTokens reads path once; a missing or empty file is not an error (no
// token works until one is written), only logged.
func NewTokens(path string, logger *slog.Logger, m *Metrics) *Tokens {
	t := &Tokens{path: path, logger: logger, metrics: m}
	t.current.Store(&tokenSet{})
	t.reload()
	return t
}

// Valid reports whether token is one of the current tokens. It compares
// against every token, without stopping at a match, in constant time.
func (t *Tokens) Valid(token string) bool {
	if token == "" {
		return false
	}
	d := sha256.Sum256([]byte(token))
	match := 0
	for _, want := range t.current.Load().digests {
		match |= subtle.ConstantTimeCompare(d[:], want[:])
	}
	return match == 1
}

// Count returns the number of valid tokens.
func (t *Tokens) Count() int { return len(t.current.Load().digests) }

// Watch reloads the file every interval until ctx is done.
func (t *Tokens) Watch(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.reload()
		}
	}
}

// reload reads the file and swaps the set when its content changed.
func (t *Tokens) reload() {
	raw, err := os.ReadFile(t.path)
	if err != nil {
		msg := err.Error()
		if msg != t.rawErr {
			t.rawErr = msg
			level := slog.LevelError
			if errors.Is(err, fs.ErrNotExist) {
				msg = "the tokens file does not exist"
			}
			t.logger.Log(context.Background(), level, "cannot read the tokens file: no bearer token is accepted",
				"path", t.path, "error", msg)
			t.current.Store(&tokenSet{})
			t.loaded = false
			t.metrics.setTokens(0)
		}
		return
	}
	if t.loaded && bytes.Equal(raw, t.raw) {
		return
	}
	t.rawErr = ""
	t.raw, t.loaded = raw, true
	set := parseTokens(raw)
	t.current.Store(set)
	t.metrics.setTokens(len(set.digests))
	if len(set.digests) == 0 {
		t.logger.Error("the tokens file holds no token: no bearer token is accepted", "path", t.path)
		return
	}
	// Never log a token; the count is enough to see a rotation happen.
	t.logger.Info("loaded bearer tokens", "path", t.path, "count", len(set.digests))
}

// parseTokens reads one token a line; blank lines and lines starting with #
// are ignored, surrounding spaces are trimmed.
func parseTokens(raw []byte) *tokenSet {
	set := &tokenSet{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		set.digests = append(set.digests, sha256.Sum256([]byte(line)))
	}
	return set
}

// bearer extracts the token of an "Authorization: Bearer <token>" header.
func bearer(header string) string {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
