package dashboard_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tend-sh/tend/internal/dashboard"
	"github.com/tend-sh/tend/internal/program"
)

func get(t *testing.T, path string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	dashboard.Handler().ServeHTTP(rec, req)
	return rec.Result()
}

func TestHandlerServesFiles(t *testing.T) {
	for path, ctype := range map[string]string{
		"/":             "text/html",
		"/ui/app.js":    "text/javascript",
		"/ui/style.css": "text/css",
		"/ui/icon.svg":  "image/svg+xml",
		"/ui/vocab.js":  "text/javascript",
	} {
		resp := get(t, path)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("GET %s: %d %q, %d bytes; want 200 %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), ctype)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: CSP %q does not keep the page to its origin", path, csp)
		}
		etag := resp.Header.Get("ETag")
		if etag == "" {
			t.Errorf("GET %s: no ETag", path)
			continue
		}
		if again := get(t, path, "If-None-Match", etag); again.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", path, again.StatusCode)
		}
	}
	for _, path := range []string{"/ui/", "/ui/nothing.js", "/ui/../index.html", "/ui/./app.js", "/index.html", "/ui/static/app.js"} {
		if resp := get(t, path); resp.StatusCode != 404 {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
}

// The page may request nothing outside the daemon: no URL in the static
// files names another host (the SVG namespace is a name, not a request).
func TestNoExternalReferences(t *testing.T) {
	url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := filepath.WalkDir("static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasPrefix(filepath.ToSlash(path), "static/vendor/") {
			return nil // third-party files as published (licences and comments name hosts); the CSP holds the page to its origin
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range url.FindAllString(string(b), -1) {
			if m != "http://www.w3.org" {
				t.Errorf("%s refers to %s", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// vocab.js is package program's lists, and the page's modules take the
// lists from it rather than writing their own.
func TestVocabIsProgramsLists(t *testing.T) {
	body, _ := io.ReadAll(get(t, "/ui/vocab.js").Body)
	for name, list := range map[string][]string{
		"KINDS": program.Kinds(), "STATES": program.States(),
		"LIFECYCLES": program.Lifecycles(), "RESTART_CAUSES": program.RestartCauses(),
	} {
		j, _ := json.Marshal(list)
		if want := "export const " + name + " = " + string(j) + ";\n"; !strings.Contains(string(body), want) {
			t.Errorf("vocab.js lacks %s\n%s", want, body)
		}
	}
	if !strings.Contains(string(body), `export const LIFECYCLE_UNKNOWN = "unknown";`) {
		t.Errorf("vocab.js:\n%s", body)
	}
	for _, name := range []string{"app.js", "fmt.js"} {
		b, _ := os.ReadFile(filepath.Join("static", name))
		if !strings.Contains(string(b), "from './vocab.js'") || strings.Contains(string(b), "'tracked_changed', 'daemon'") {
			t.Errorf("%s does not take its lists from vocab.js", name)
		}
	}
}
