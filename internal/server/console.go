package server

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

// The console (docs/console.md) is a static page and ES modules served at
// /ui from the binary: no build step, no third-party code, no CDN (a
// cluster may have no internet). It signs in with an API token kept in the
// browser tab's sessionStorage and calls the /v1 API like any client, so
// every action goes through the same roles, policy and history.
//
//go:embed ui
var consoleFiles embed.FS

// consoleCSP allows only the service's own scripts, styles and API:
// no inline script or style, no eval, no framing (clickjacking of the
// delete and erase buttons), no plugins, no <base> rewriting, and Trusted
// Types so that no code path can turn API data into markup.
const consoleCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types 'none'"

// consoleAsset is one embedded file with its validator.
type consoleAsset struct {
	body        []byte
	contentType string
	etag        string
}

// consoleAssets reads the embedded files once (they never change in a
// running binary).
func consoleAssets() map[string]consoleAsset {
	out := map[string]consoleAsset{}
	err := fs.WalkDir(consoleFiles, "ui", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := consoleFiles.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		out[strings.TrimPrefix(p, "ui/")] = consoleAsset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil { // cannot happen: the files are embedded at build time
		panic("reading the embedded console: " + err.Error())
	}
	return out
}

// registerConsole serves the console. Its routes go on the mux directly,
// not in the API route table that openapi.yaml documents.
func (s *Server) registerConsole() {
	assets := consoleAssets()
	s.mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		setConsoleHeaders(w)
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	})
	s.mux.HandleFunc("GET /ui/", func(w http.ResponseWriter, r *http.Request) {
		setConsoleHeaders(w)
		name := strings.TrimPrefix(r.URL.Path, "/ui/")
		if name == "" {
			name = "index.html"
		}
		a, ok := assets[name]
		if !ok {
			writeProblem(w, r, newProblem(probNoRoute, "the console has no file "+r.URL.Path))
			return
		}
		w.Header().Set("Content-Type", a.contentType)
		// no-cache: revalidate with the ETag, so an upgraded binary's console is used at once.
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("ETag", a.etag)
		if r.Header.Get("If-None-Match") == a.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write(a.body)
	})
}

// setConsoleHeaders are the security headers of every console response.
func setConsoleHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
}
