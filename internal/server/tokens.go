package server

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/engram-dev/engram/internal/auth"
)

// Tokens holds the credentials valid right now: the static tokens of the
// tokens file and the keys that verify signed tokens. It reloads both
// files; the operator mounts the <runtime>-api-token Secret there and the
// kubelet swaps the files when the Secret changes, so polling their content
// is the one method that works for every volume type (inotify misses the
// symlink swap of projected volumes).
type Tokens struct {
	static  watchedFile[*auth.StaticTokens]
	keys    watchedFile[*auth.SigningKeys]
	logger  *slog.Logger
	metrics *Metrics
	now     func() time.Time
}

// NewTokens reads the tokens file (and the signing-key file, when keysPath
// is set) once. A missing or empty tokens file is not an error (no static
// token works until one is written), only logged.
func NewTokens(tokensPath, keysPath string, logger *slog.Logger, m *Metrics) *Tokens {
	t := &Tokens{logger: logger, metrics: m, now: time.Now}
	t.static = watchedFile[*auth.StaticTokens]{path: tokensPath, what: "tokens", parse: auth.ParseTokens,
		none: "no bearer token is accepted"}
	t.keys = watchedFile[*auth.SigningKeys]{path: keysPath, what: "signing-key", parse: auth.ParseSigningKeys,
		none: "no signed token is accepted"}
	t.reload()
	return t
}

// Authenticate returns the credential of a bearer token: a signed token is
// verified with the signing keys, any other is looked up among the static
// tokens in constant time.
func (t *Tokens) Authenticate(token string) (auth.Credential, error) {
	if auth.IsSigned(token) {
		return t.keys.current().Verify(token, t.now())
	}
	if c, ok := t.static.current().Lookup(token); ok {
		return c, nil
	}
	return auth.Credential{}, errUnknownToken
}

var errUnknownToken = errors.New("the token is not one of this service's tokens")

// Count returns the number of static tokens loaded.
func (t *Tokens) Count() int { return t.static.current().Len() }

// SigningKeys returns the signing keys loaded (none when no key file is set).
func (t *Tokens) SigningKeys() *auth.SigningKeys { return t.keys.current() }

// Watch reloads the files every interval until ctx is done.
func (t *Tokens) Watch(ctx context.Context, interval time.Duration) {
	every(ctx, interval, t.reload)
}

// every calls fn every interval until ctx is done (the reloads of the
// mounted tokens and certificate).
func every(ctx context.Context, interval time.Duration, fn func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			fn()
		}
	}
}

func (t *Tokens) reload() {
	if t.static.reload(t.logger) {
		t.metrics.setTokens(t.static.current().Len())
	}
	if t.keys.path != "" && t.keys.reload(t.logger) {
		t.metrics.setSigningKeys(t.keys.current().Len())
	}
}

// lenOf counts what a file holds (tokens or keys).
type lenOf interface{ Len() int }

// watchedFile is one polled file and what was parsed from it.
type watchedFile[T lenOf] struct {
	path  string
	what  string // "tokens" or "signing-key", for the log
	none  string // the consequence of an empty or missing file, for the log
	parse func([]byte) (T, []auth.Skipped)

	value  atomic.Pointer[T]
	raw    []byte // the content last parsed, to log changes only once
	loaded bool
	rawErr string
}

// current is what was loaded last (the zero T before the first load or
// after the file went away: nil, which accepts nothing).
func (f *watchedFile[T]) current() T {
	if p := f.value.Load(); p != nil {
		return *p
	}
	var zero T
	return zero
}

// reload reads the file and swaps the value when the content changed. It
// reports whether the value changed; lines skipped are logged by number and
// reason, never by content.
func (f *watchedFile[T]) reload(logger *slog.Logger) bool {
	raw, err := os.ReadFile(f.path)
	if err != nil {
		msg := err.Error()
		if msg == f.rawErr {
			return false
		}
		f.rawErr = msg
		if errors.Is(err, fs.ErrNotExist) {
			msg = "the file does not exist"
		}
		logger.Error("cannot read the "+f.what+" file: "+f.none, "path", f.path, "error", msg)
		f.value.Store(nil)
		f.loaded = false
		return true
	}
	if f.loaded && bytes.Equal(raw, f.raw) {
		return false
	}
	f.rawErr = ""
	f.raw, f.loaded = raw, true
	v, skipped := f.parse(raw)
	for _, s := range skipped {
		logger.Warn("skipped a line of the "+f.what+" file", "path", f.path, "line", s.Line, "reason", s.Reason)
	}
	f.value.Store(&v)
	if n := v.Len(); n == 0 {
		logger.Error("the "+f.what+" file holds nothing valid: "+f.none, "path", f.path)
	} else {
		// Never log a token or a key; the count shows a rotation happen.
		logger.Info("loaded the "+f.what+" file", "path", f.path, "count", n)
	}
	return true
}

// bearer extracts the token of an "Authorization: Bearer <token>" header.
func bearer(header string) string {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
