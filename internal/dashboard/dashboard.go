// Package dashboard is tend's web dashboard: static files (index.html,
// app.js, style.css) embedded in the binary, and vocab.js made from
// package program's lists, so running it needs no build step and the page
// makes no request anywhere but the daemon. The page
// reads the fleet through the API alone: GET /v1/status (polled for the
// memory sparklines), the /v1/events SSE stream for live changes, GET
// /v1/status/{id} and /v1/logs/{id} for one instance, POST
// /v1/programs/{id}/start|stop|restart for its buttons, and the WebSocket
// GET /v1/attach/{id} for a tty instance's terminal (xterm.js, vendored
// under static/vendor/xterm). Over TCP every request carries the page's
// session secret (static/session.js; docs/trust.md#dashboard-sessions),
// which is why the event stream is read through fetch (static/sse.js)
// rather than EventSource.
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
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

//go:embed static
var static embed.FS

// csp keeps the page to its own origin: no CDN, no inline script, no
// frames. It is also what makes "the page talks only to the daemon" hold
// for any future change to app.js. connect-src 'self' covers the
// terminal's WebSocket too (ws: and wss: of the same host and port).
//
// Inline styles are allowed: xterm.js's renderer writes its measures and
// theme into <style> elements and true colours into style attributes, and
// neither takes a nonce. No style can reach another origin (img-src,
// font-src and connect-src are the page's own), and scripts stay 'self'.
const csp = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
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
	out := map[string]file{"vocab.js": newFile("vocab.js", vocab())}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		out[name] = newFile(name, data)
		return nil
	})
	if err != nil {
		panic("dashboard: reading embedded files: " + err.Error()) // a build without them is broken
	}
	return out
}

func newFile(name string, data []byte) file {
	sum := sha256.Sum256(data)
	return file{name: name, data: data, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// vocab is the module vocab.js: tend's vocabulary as package program lists
// it (the event kinds, states, lifecycles and restart causes), so the
// page's modules import the lists instead of keeping copies of their own.
// It is made here rather than generated into static/: a generated copy
// is one more place the lists are written, kept equal by a test, while
// this is the Go lists themselves, and needs no build step.
func vocab() []byte {
	var b bytes.Buffer
	b.WriteString("// tend's vocabulary, made by the daemon from its own lists (package program).\n")
	for _, l := range []struct {
		name string
		list []string
	}{
		{"KINDS", program.Kinds()},
		{"STATES", program.States()},
		{"LIFECYCLES", program.Lifecycles()},
		{"RESTART_CAUSES", program.RestartCauses()},
	} {
		j, _ := json.Marshal(l.list)
		fmt.Fprintf(&b, "export const %s = %s;\n", l.name, j)
	}
	fmt.Fprintf(&b, "export const LIFECYCLE_UNKNOWN = %q;\n", program.LifecycleUnknown)
	return b.Bytes()
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
