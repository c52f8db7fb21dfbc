package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestConsoleServing: /ui serves the embedded page and modules with the
// security headers (strict CSP, nosniff, no referrer, no framing), without
// a token (the page is static; its API calls need one), revalidated by
// ETag; /ui redirects to /ui/; an unknown file is a 404 problem; the
// page's markup holds no inline script or style for the CSP to refuse.
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

	for _, f := range []string{"app.js", "api.js", "dom.js", "common.js", "owners.js", "memories.js", "search.js", "history.js", "context.js", "erase.js", "sessions.js"} {
		resp := get("/ui/js/"+f, nil)
		js := readBody(t, resp)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
			t.Fatalf("/ui/js/%s: %d %s", f, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		wantSecurity("/ui/js/"+f, resp)
		// Text only: the modules never write markup, and keep the token out of URLs and logs.
		for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "localStorage.set", "console.log"} {
			if strings.Contains(js, banned) {
				t.Errorf("/ui/js/%s uses %s", f, banned)
			}
		}
		again := get("/ui/js/"+f, map[string]string{"If-None-Match": resp.Header.Get("ETag")})
		if again.StatusCode != http.StatusNotModified {
			t.Errorf("/ui/js/%s with its ETag: %d, want 304", f, again.StatusCode)
		}
	}

	redirect := get("/ui", nil)
	if redirect.StatusCode != http.StatusMovedPermanently || redirect.Header.Get("Location") != "/ui/" {
		t.Fatalf("/ui: %d to %q", redirect.StatusCode, redirect.Header.Get("Location"))
	}
	wantSecurity("/ui", redirect)
	for _, path := range []string{"/ui/missing.js", "/ui/js/", "/ui/js"} {
		resp := get(path, nil)
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s, want a 404 problem", path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		wantSecurity(path, resp)
	}
	if resp := get("/ui/../openapi.json", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("/ui/../openapi.json: %d, want 404 (not canonical)", resp.StatusCode)
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
