// Package dashboard is tend's web dashboard: static files (index.html,
// app.js, style.css) embedded in the binary, so running it needs no build
// step and the page makes no request anywhere but the daemon. The page
// reads the fleet through the API alone: GET /v1/status (polled for the
// memory sparklines), the /v1/events SSE stream for live changes, GET
// /v1/status/{id} and /v1/logs/{id} for one instance, and POST
// /v1/programs/{id}/start|stop|restart for its buttons.
//
// Handler serves "/" (the page) and "/ui/NAME" (its assets). Access control
// is not its business: package api serves it (routes.go) on the unix socket
// and behind its TCP guard, whose login page is api's too.
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed static
var static embed.FS

// csp keeps the page to its own origin: no CDN, no inline script, no
// frames. It is also what makes "the page talks only to the daemon" hold
// for any future change to app.js.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// file is one embedded asset, read once.
type file struct {
	name string
	data []byte
	etag string
}

// files are the assets by URL name ("index.html", "app.js", ...), built
// on first use and read-only after: not at init, which every tend exec
// runs, CLI verbs included.
var files = sync.OnceValue(load)

func load() map[string]file {
	out := map[string]file{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		name := strings.TrimPrefix(p, "static/")
		out[name] = file{name: name, data: data, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("dashboard: reading embedded files: " + err.Error()) // a build without them is broken
	}
	return out
}

// Handler serves the dashboard: GET / is the page, GET /ui/NAME an asset.
// Mount it on "GET /{$}" and "GET /ui/".
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "index.html"
		if r.URL.Path != "/" {
			rest, ok := strings.CutPrefix(r.URL.Path, "/ui/")
			if !ok || rest != path.Clean(rest) {
				notFound(w)
				return
			}
			name = rest
		}
		f, ok := files()[name]
		if !ok {
			notFound(w)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		// Revalidate every time (cheap, by ETag): a daemon upgrade must not
		// leave an old app.js in the browser's cache.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.data))
	})
}

func notFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	w.Write([]byte(`{"error":"no such dashboard file"}` + "\n"))
}
