package dashboard_test

// Helpers of the browser test: the tend binary and its daemon, the CLI, and
// a headless chromium.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tend-sh/tend/internal/client"
	"github.com/tend-sh/tend/internal/testutil"
)

// loginCode runs tend dashboard and returns the code it prints, checking
// that it prints the dashboard's address and no URL holding the code.
func (d *tend) loginCode(t *testing.T) string {
	t.Helper()
	out := d.cli(t, "dashboard")
	m := regexp.MustCompile(`(?m)^Login code: (\S+) `).FindStringSubmatch(out)
	if m == nil || !strings.HasPrefix(out, "Dashboard:  "+d.base+"/\n") || strings.Contains(out, "code=") {
		t.Fatalf("tend dashboard printed:\n%s\nwant the dashboard at %s/ and a login code", out, d.base)
	}
	return m[1]
}

// openDashboard starts tend dashboard --open with a fake xdg-open that
// records the page it is given, and returns that page; wait waits for
// tend dashboard to end and returns its output.
func (d *tend) openDashboard(t *testing.T) (page string, wait func() string) {
	t.Helper()
	bin, rec := t.TempDir(), t.TempDir()
	script := "#!/bin/sh\nprintf '%s' \"$1\" > \"" + rec + "/page.tmp\" && mv \"" + rec + "/page.tmp\" \"" + rec + "/page\"\n"
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(d.bin, "--socket", d.sock, "dashboard", "--open")
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "XDG_RUNTIME_DIR="+t.TempDir())
	var out testutil.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	testutil.Eventually(t, "xdg-open to be given the page", func() bool {
		b, err := os.ReadFile(filepath.Join(rec, "page"))
		page = string(b)
		return err == nil
	})
	return page, func() string {
		select {
		case err := <-done:
			done <- err // for the cleanup
			if err != nil {
				t.Errorf("tend dashboard --open: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("tend dashboard --open still runs after the browser logged in")
		}
		return out.String()
	}
}

// screenshot saves the whole page as dir/name (and, for a person looking
// at the page, into $TEND_SCREENSHOT_DIR if set).
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if extra := os.Getenv("TEND_SCREENSHOT_DIR"); extra != "" {
		os.WriteFile(filepath.Join(extra, name), shot, 0o644)
	}
}

// tend is a running tend up.
type tend struct {
	bin, cfg, sock string
	addr, base     string // host:port and http://host:port of daemon.http
	client         *client.Client
}

// startTend builds tend, writes the fleet's config and runs tend up on it
// in its own process group; cleanup stops it (SIGTERM, then SIGKILL).
func startTend(t *testing.T) *tend {
	t.Helper()
	d, out := startTendWith(t, fleetConfig, fleetIDs)
	if d == nil {
		t.Fatalf("tend up ended:\n%s", out)
	}
	return d
}

// startTendWith is startTend with a config (%d is the HTTP port) and the
// ids it registers. When tend up ends instead of serving, it returns nil
// and what tend up said.
func startTendWith(t *testing.T, config string, ids []string) (*tend, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "tenddash") // short: the socket path must fit in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &tend{bin: filepath.Join(dir, "tend"), cfg: filepath.Join(dir, "tend.toml"), sock: filepath.Join(dir, ".tend", "tend.sock")}
	build := exec.Command("go", "build", "-o", d.bin, "./cmd/tend")
	build.Dir = moduleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	port := freePort(t)
	d.addr = fmt.Sprintf("127.0.0.1:%d", port)
	d.base = "http://" + d.addr
	if err := os.WriteFile(d.cfg, fmt.Appendf(nil, config, port), 0o644); err != nil {
		t.Fatal(err)
	}
	var out testutil.Buffer
	up := exec.Command(d.bin, "up", "-c", d.cfg)
	up.Stdout, up.Stderr = &out, &out
	up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { up.Wait(); close(exited) }()
	t.Cleanup(func() {
		// Each run has its own process group; remember them in case tend
		// up has to be killed before it stops them.
		var groups []int
		if list, err := d.client.List(false); err == nil {
			for _, st := range list {
				if st.PID != nil {
					groups = append(groups, *st.PID)
				}
			}
		}
		syscall.Kill(-up.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			syscall.Kill(-up.Process.Pid, syscall.SIGKILL)
			<-exited
			for _, pg := range groups {
				syscall.Kill(-pg, syscall.SIGKILL)
			}
			t.Errorf("tend up did not stop on SIGTERM")
		}
		if t.Failed() {
			t.Logf("tend up output:\n%s", out.String())
		}
	})
	d.client = client.New(d.sock)
	testutil.Eventually(t, "every instance to be registered", func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		list, err := d.client.List(false)
		if err != nil {
			return false
		}
		var got []string
		for _, st := range list {
			got = append(got, st.ID)
		}
		return slices.Equal(got, ids)
	})
	select {
	case <-exited:
		return nil, out.String()
	default:
	}
	return d, ""
}

// checkToken checks the daemon's token file and that TCP takes it, and
// only it, as the CLI and scripts send it.
func (d *tend) checkToken(t *testing.T) {
	t.Helper()
	path := filepath.Join(filepath.Dir(d.sock), "token")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("token file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode = %o, want 600", fi.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	token := strings.TrimSpace(string(b))
	if len(token) != 64 {
		t.Errorf("token %q: want 64 hex characters", token)
	}
	for auth, want := range map[string]int{"": 401, "Bearer wrong": 401, "Bearer " + token: 200} {
		req, _ := http.NewRequest("GET", d.base+"/v1/status", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /v1/status over TCP with %q: %d, want %d", auth, resp.StatusCode, want)
		}
	}
	resp, err := http.Get(d.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /healthz over TCP without a token: %d, want 200", resp.StatusCode)
	}
}

// cli runs the tend binary against the daemon and returns its output.
func (d *tend) cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(d.bin, append([]string{"--socket", d.sock}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tend %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// newBrowser starts a headless chromium with a fresh profile and no
// background traffic. requests returns every URL the page asked for;
// problems, its uncaught exceptions and console errors.
func newBrowser(t *testing.T) (ctx context.Context, requests, problems func() []string) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelTime := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil { // start the browser and open the tab
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	var mu sync.Mutex
	var urls, msgs []string
	err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			urls = append(urls, ev.Request.URL)
		case *runtime.EventExceptionThrown:
			msgs = append(msgs, "exception: "+ev.ExceptionDetails.Text+describe(ev.ExceptionDetails.Exception))
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				msgs = append(msgs, fmt.Sprintf("%s: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	snapshot := func(s *[]string) func() []string {
		return func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(*s)
		}
	}
	return ctx, snapshot(&urls), snapshot(&msgs)
}

func describe(o *runtime.RemoteObject) string {
	if o == nil {
		return ""
	}
	return " " + o.Description
}

// waitJS waits until the JavaScript expression is true in the page, across
// navigations (a login goes through a page that moves on by itself).
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return
		}
		// A navigation under way drops the page's context: -32000.
		if !strings.Contains(err.Error(), "(-32000)") || time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// moduleRoot is the directory of go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
