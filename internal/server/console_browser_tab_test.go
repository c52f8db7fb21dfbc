package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/engram-dev/engram/internal/testenv"
)

// The headless browser of TestConsoleInBrowser (console_browser_test.go).

// browser is a headless Chromium tab and what it reported.
type browser struct {
	t        *testing.T
	ctx      context.Context
	shots    string
	mu       sync.Mutex
	problems []string // CSP violations, JavaScript exceptions and errors
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := testenv.Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		// --no-sandbox only because the tests run as root in a container,
		// where Chromium's sandbox cannot start; the page is our own.
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	// The whole browser session is bounded too: its context ends the process.
	root, cancelRoot := context.WithTimeout(context.Background(), 4*time.Minute)
	alloc, cancelAlloc := chromedp.NewExecAllocator(root, opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelCtx(); cancelAlloc(); cancelRoot() })

	shots := t.TempDir()
	if dir := os.Getenv(artifactsEnv); dir != "" {
		shots = filepath.Join(dir, "console")
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b := &browser{t: t, ctx: ctx, shots: shots}
	// Subscriptions buffer events from the start; the goroutines end with ctx.
	logs := chromedp.Events(ctx, cdplog.EntryAdded)
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	go func() {
		for ev, err := range logs {
			if err != nil {
				return
			}
			// Network errors (the 401 of the wrong token) are expected;
			// security (CSP, Trusted Types) and script errors are not.
			if e := ev.Entry; e != nil && e.Source != cdplog.EntrySourceNetwork && e.Level == cdplog.EntryLevelError {
				b.report(fmt.Sprintf("console %s: %s (%s)", e.Source, e.Text, e.URL))
			}
		}
	}()
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			b.report((&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error())
		}
	}()
	return b
}

func (b *browser) report(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, s)
}

// do runs the steps of one named step within stepTimeout.
func (b *browser) do(name string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser step %q: %v", name, err)
	}
}

// text returns the text of the first element matching css.
func (b *browser) text(css string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		b.t.Fatalf("reading the text of %s: %v", css, err)
	}
	return s
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// until waits (bounded) until the JavaScript expression is true.
func (b *browser) until(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(stepTimeout-time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting until %s (%s): %v", what, expr, err)
	}
}

// screenshot writes a full-page PNG named console-<name>.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	b.capture(name, chromedp.FullScreenshot(100))
}

// screenshotAt writes a PNG of the viewport scrolled to the element css
// (for pages too long to show whole).
func (b *browser) screenshotAt(name, css string) {
	b.t.Helper()
	b.do("scroll to "+css, chromedp.Evaluate[chromedp.Void](`document.querySelector('`+css+`').scrollIntoView()`))
	b.capture(name, chromedp.CaptureScreenshot())
}

func (b *browser) capture(name string, shot chromedp.Action[[]byte]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	file := "console-" + name + ".png"
	if err := os.WriteFile(filepath.Join(b.shots, file), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	if os.Getenv(updateImagesEnv) == "1" {
		if err := os.WriteFile(filepath.Join(testenv.RepoRoot(), "docs", "images", file), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
}
