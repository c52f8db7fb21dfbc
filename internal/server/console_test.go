package server

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestConsoleServing: /ui serves the embedded page and modules with the
// security headers (strict CSP, nosniff, no referrer, no framing), without
// a token (the page is static; its API calls need one), revalidated by
// ETag; /ui redirects to /ui/; an unknown file is a 404 problem; the
// page's markup holds no inline script or style for the CSP to refuse.
// Every file embedded under ui/ is checked, so a new module cannot slip
// past the list of a test.
func TestConsoleServing(t *testing.T) {
	s := New(Deps{Metrics: NewMetrics(), Tokens: &Tokens{}})
	h := s.Handler()
	get := func(path string, hdr map[string]string) *http.Response {
		t.Helper()
		r, _ := http.NewRequest("GET", path, nil)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Result()
	}
	wantSecurity := func(path string, resp *http.Response) {
		t.Helper()
		csp := resp.Header.Get("Content-Security-Policy")
		for _, d := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "require-trusted-types-for 'script'"} {
			if !strings.Contains(csp, d) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, d)
			}
		}
		if strings.Contains(csp, "unsafe-") {
			t.Errorf("%s: CSP %q allows unsafe sources", path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Referrer-Policy") != "no-referrer" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", path, resp.Header)
		}
	}

	index := get("/ui/", nil)
	body := readBody(t, index)
	if index.StatusCode != 200 || !strings.HasPrefix(index.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, `<script type="module" src="/ui/js/app.js">`) {
		t.Fatalf("/ui/: %d %s %q", index.StatusCode, index.Header.Get("Content-Type"), body)
	}
	wantSecurity("/ui/", index)
	if strings.Contains(body, "style=") || strings.Contains(body, "<style") || strings.Count(body, "<script") != 1 {
		t.Fatalf("/ui/ has inline script or style: %s", body)
	}

	// Every embedded file, not a list that a new module could be missing
	// from: served with its type, the security headers and its ETag; every
	// module and page passes the checks below.
	served := 0
	err := fs.WalkDir(consoleFiles, "ui", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		served++
		path := "/" + p
		resp := get(path, nil)
		content := readBody(t, resp)
		embedded, _ := consoleFiles.ReadFile(p)
		if resp.StatusCode != 200 || content != string(embedded) {
			t.Errorf("%s: %d, %d bytes, want 200 and the %d embedded bytes", path, resp.StatusCode, len(content), len(embedded))
			return nil
		}
		wantSecurity(path, resp)
		wantConsoleFile(t, path, resp.Header.Get("Content-Type"), content)
		again := get(path, map[string]string{"If-None-Match": resp.Header.Get("ETag")})
		again.Body.Close()
		if resp.Header.Get("ETag") == "" || again.StatusCode != http.StatusNotModified {
			t.Errorf("%s with its ETag %q: %d, want 304", path, resp.Header.Get("ETag"), again.StatusCode)
		}
		return nil
	})
	if err != nil || served < 3 {
		t.Fatalf("walking the embedded console: %d files, %v", served, err)
	}

	redirect := get("/ui", nil)
	redirect.Body.Close()
	if redirect.StatusCode != http.StatusMovedPermanently || redirect.Header.Get("Location") != "/ui/" {
		t.Fatalf("/ui: %d to %q", redirect.StatusCode, redirect.Header.Get("Location"))
	}
	wantSecurity("/ui", redirect)
	for _, path := range []string{"/ui/missing.js", "/ui/js/", "/ui/js"} {
		resp := get(path, nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s, want a 404 problem", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		wantSecurity(path, resp)
	}
	resp := get("/ui/../openapi.json", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/ui/../openapi.json: %d, want 404 (not canonical)", resp.StatusCode)
	}
}

// wantConsoleFile checks one embedded file by its kind. Pages: no inline
// script or style for the CSP to refuse. Modules: text only, they never
// write markup, and keep the token out of URLs and logs. Styles: nothing
// loaded from elsewhere. Any other kind is an error: a new kind needs its
// own checks here.
var inlineHandler = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)

func wantConsoleFile(t *testing.T, path, contentType, content string) {
	t.Helper()
	var banned []string
	switch {
	case strings.HasSuffix(path, ".html") && strings.HasPrefix(contentType, "text/html"):
		banned = []string{"style=", "<style", "javascript:"}
		if inlineHandler.MatchString(content) {
			t.Errorf("%s has an inline event handler", path)
		}
		if n := strings.Count(content, "<script"); n != strings.Count(content, `<script type="module" src="/ui/js/`) {
			t.Errorf("%s has %d script elements, not all external modules of /ui/js/", path, n)
		}
	case strings.HasSuffix(path, ".js") && strings.HasPrefix(contentType, "text/javascript"):
		banned = []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "localStorage.set", "console.log"}
	case strings.HasSuffix(path, ".css") && strings.HasPrefix(contentType, "text/css"):
		banned = []string{"@import", "url(http", "url(//", "expression("}
	default:
		t.Errorf("%s: served as %q; the console test has no checks for this kind of file", path, contentType)
	}
	for _, b := range banned {
		if strings.Contains(content, b) {
			t.Errorf("%s contains %q", path, b)
		}
	}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
