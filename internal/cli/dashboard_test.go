package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/testutil"
)

// withDashboard serves d's API on a TCP port too, as daemon.http does, and
// returns its base URL.
func (d *fakeDaemon) withDashboard(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve, err := d.srv.AttachTCP(l, api.TCPOptions{Token: strings.Repeat("t", 32)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := serve(); err != nil {
			t.Errorf("serving TCP: %v", err)
		}
	}()
	t.Cleanup(func() {
		d.srv.Close()
		<-done
	})
	return "http://" + l.Addr().String()
}

var codeLine = regexp.MustCompile(`(?m)^Login code: ([A-Z2-7-]+) \(works once, until \d\d:\d\d:\d\d\)$`)

func TestDashboardPrintsCodeNotLink(t *testing.T) {
	d := startDaemon(t)
	base := d.withDashboard(t)
	r := d.tend(t, "dashboard")
	m := codeLine.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || !strings.HasPrefix(r.stdout, "Dashboard:  "+base+"/\n") {
		t.Fatalf("exit %d, stdout:\n%s\nwant the dashboard's address and a login code", r.code, r.stdout)
	}
	if strings.Contains(r.stdout, "code=") {
		t.Errorf("a URL holding the code was printed:\n%s", r.stdout)
	}
	// The code logs a browser in by POST.
	resp, err := http.PostForm(base+"/login", url.Values{"code": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(resp.Cookies()) != 1 {
		t.Errorf("POST /login with the printed code: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
}

func TestDashboardWithoutHTTP(t *testing.T) {
	d := startDaemon(t)
	d.tend(t, "dashboard").wantErr(t, 1, "ssh -L 7070:"+d.sock)
}

// fakeXDGOpen is an xdg-open that records its arguments, its process id and
// the page it was given (and that page's mode) in $TEND_FAKE_XDG, as a
// browser would read it, then runs until $TEND_FAKE_XDG/release appears
// (at most 30 s) and exits with $TEND_FAKE_XDG_EXIT.
const fakeXDGOpen = `#!/bin/sh
rec="$TEND_FAKE_XDG"
echo $$ > "$rec/pid"
printf '%s\n' "$@" > "$rec/argv"
stat -c %a "$1" > "$rec/mode"
cat "$1" > "$rec/page.tmp" && mv "$rec/page.tmp" "$rec/page"
i=0
while [ ! -e "$rec/release" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
exit "${TEND_FAKE_XDG_EXIT:-0}"
`

// xdgFixture puts the fake xdg-open first on PATH and a private runtime
// directory in XDG_RUNTIME_DIR; it returns the record and runtime dirs.
func xdgFixture(t *testing.T, exit int) (rec, runtime string) {
	t.Helper()
	bin, rec, runtime := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(fakeXDGOpen), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("TEND_FAKE_XDG", rec)
	t.Setenv("TEND_FAKE_XDG_EXIT", strconv.Itoa(exit))
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	return rec, runtime
}

// procScan records every distinct command line in /proc while it runs.
type procScan struct {
	mu   sync.Mutex // guards seen
	seen map[string]bool
	done chan struct{}
	wg   sync.WaitGroup
}

func scanProc() *procScan {
	p := &procScan{seen: map[string]bool{}, done: make(chan struct{})}
	p.wg.Go(func() {
		for {
			paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, path := range paths {
				if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
					p.mu.Lock()
					p.seen[string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))] = true
					p.mu.Unlock()
				}
			}
			select {
			case <-p.done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	})
	return p
}

// saw reports whether a command line containing s was seen.
func (p *procScan) saw(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.seen {
		if strings.Contains(c, s) {
			return true
		}
	}
	return false
}

// stop ends the scan and returns what it saw.
func (p *procScan) stop() []string {
	close(p.done)
	p.wg.Wait()
	var out []string
	for c := range p.seen {
		out = append(out, c)
	}
	return out
}

// tend dashboard --open: the code is in no command line while it runs,
// xdg-open gets a private 0600 page that POSTs the code, and the page is
// removed once the browser has used it.
func TestDashboardOpen(t *testing.T) {
	rec, runtime := xdgFixture(t, 0)
	d := startDaemon(t)
	base := d.withDashboard(t)
	scan := scanProc()

	var out, errb testutil.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- Main(context.Background(), parts, []string{"--socket", d.sock, "dashboard", "--open"}, &out, &errb)
	}()

	pagePath := filepath.Join(rec, "page")
	testutil.Eventually(t, "xdg-open to read the page", func() bool { _, err := os.Stat(pagePath); return err == nil })
	page, _ := os.ReadFile(pagePath)
	argv, _ := os.ReadFile(filepath.Join(rec, "argv"))
	mode, _ := os.ReadFile(filepath.Join(rec, "mode"))
	m := regexp.MustCompile(`<input type="hidden" name="code" value="([A-Z2-7-]+)">`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("the page holds no code:\n%s", page)
	}
	code := string(m[1])
	if !bytes.Contains(page, []byte(`<form id="login" method="post" action="`+base+`/login">`)) {
		t.Errorf("the page does not POST to %s/login:\n%s", base, page)
	}
	if bytes.Contains(page, []byte("code=")) {
		t.Errorf("the page holds a URL with the code:\n%s", page)
	}
	file := strings.TrimSpace(string(argv))
	if strings.Count(string(argv), "\n") != 1 || !strings.HasPrefix(file, runtime+"/tend-login-") || !strings.HasSuffix(file, "/login.html") {
		t.Errorf("xdg-open got %q, want one argument: a login.html in a new directory of %s", argv, runtime)
	}
	if strings.TrimSpace(string(mode)) != "600" {
		t.Errorf("the page's mode is %s, want 600", mode)
	}
	if fi, err := os.Stat(filepath.Dir(file)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the page's directory: %v, %v; want mode 700", fi.Mode(), err)
	}

	// However busy the machine, the scan sees xdg-open while it runs.
	testutil.Eventually(t, "the /proc scan to see xdg-open running", func() bool { return scan.saw("xdg-open " + file) })
	if err := os.WriteFile(filepath.Join(rec, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	// The browser posts the code; tend dashboard sees it used and cleans up.
	resp, err := http.PostForm(base+"/login", url.Values{"code": {code}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST /login with the page's code: %d", resp.StatusCode)
	}
	select {
	case c := <-exit:
		if c != 0 || !strings.Contains(out.String(), "Logged in.") {
			t.Errorf("tend dashboard --open: exit %d, stdout:\n%s\nstderr:\n%s", c, out.String(), errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tend dashboard --open did not end after the browser logged in")
	}
	lines := scan.stop()
	if entries, _ := os.ReadDir(runtime); len(entries) != 0 {
		t.Errorf("left in the runtime directory: %v", entries)
	}

	for _, c := range lines {
		for _, form := range []string{code, strings.ReplaceAll(code, "-", "")} {
			if strings.Contains(c, form) {
				t.Errorf("the login code is in a command line: %q", c)
			}
		}
	}

	// xdg-open was waited for: no zombie left behind.
	pid, _ := os.ReadFile(filepath.Join(rec, "pid"))
	testutil.Eventually(t, "xdg-open to be reaped", func() bool {
		_, err := os.Stat("/proc/" + strings.TrimSpace(string(pid)))
		return err != nil
	})
}

// If xdg-open fails, the page goes at once and the code is left to paste.
func TestDashboardOpenFails(t *testing.T) {
	rec, runtime := xdgFixture(t, 3)
	os.WriteFile(filepath.Join(rec, "release"), nil, 0o600)
	d := startDaemon(t)
	d.withDashboard(t)
	r := d.tend(t, "dashboard", "--open")
	if r.code != 0 || codeLine.FindString(r.stdout) == "" || !strings.Contains(r.stderr, "enter the code above") {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if entries, _ := os.ReadDir(runtime); len(entries) != 0 {
		t.Errorf("left in the runtime directory: %v", entries)
	}
}
