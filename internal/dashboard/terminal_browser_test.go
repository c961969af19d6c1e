package dashboard_test

// The dashboard's terminal in a real browser (Debian's chromium, driven by
// chromedp), over the real API and WebSocket route, against the fake
// terminals of apitest, whose program echoes each line typed as "you said:
// LINE". (browser_test.go runs the real daemon.)

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

// termRows is a JavaScript expression: the text of the page's terminal.
const termRows = `(document.querySelector('#d-term .xterm-rows')?.textContent || '')`

func TestDashboardTerminalInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		testutil.Missing(t, "no browser at %s (CI installs Debian's chromium package: apt-get install chromium)", chromiumPath)
	}
	if testing.Short() {
		t.Skip("starts a browser")
	}
	b := apitest.NewBackend(t.TempDir())
	pid := 4242
	b.Put(program.Status{ID: "web:0", Program: "web", State: program.StateRunning, Lifecycle: program.LifecycleRunning, PID: &pid})
	b.Put(program.Status{ID: "planner:0", Program: "planner", Agent: true})
	tt := apitest.NewTerminals(b)
	tt.AddTTY("planner:0", 80, 24)
	b.Put(program.Status{ID: "done:0", Program: "done"})
	tt.AddTTY("done:0", 80, 24)
	tt.Output("done:0", []byte("\x1b[32mlast words\x1b[0m"))
	tt.End("done:0", program.StateExited, program.LifecycleDone, "exited 0", "")
	ev := &apitest.Events{}
	srv := api.New(b, ev, api.Options{Version: "test", Terminals: tt})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	base := "http://" + l.Addr().String()

	ctx, requests, problems := newBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the row of planner:0", `!!document.querySelector('#rows [data-id="planner:0"]')`)

	// done:0's run has ended: its last screen, in colour.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#rows [data-id="done:0"] .c-id`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "done:0's last screen", `document.getElementById('d-term-state').textContent === 'not running' && `+termRows+`.includes('> last words')`)

	// web:0 has no terminal: no terminal section.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#rows [data-id="web:0"] .c-id`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "web:0's details without a terminal", `document.getElementById('d-title').textContent === 'web:0' && document.getElementById('d-term-section').hidden`)

	// planner:0's terminal: the screen at once, fitted to the panel, its
	// history in the scrollback above it.
	var hist strings.Builder
	for i := range 40 {
		fmt.Fprintf(&hist, "history line %d\r\n", i)
	}
	tt.Output("planner:0", []byte(hist.String()+"> "))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#rows [data-id="planner:0"] .c-id`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "planner:0's terminal", `!document.getElementById('d-term-section').hidden && `+termRows+`.includes('>')`)
	waitJS(t, ctx, "the terminal live", `document.getElementById('d-term-state').textContent === 'live'`)
	testutil.Eventually(t, "the run's terminal resized to the panel", func() bool {
		c, r := tt.Size("planner:0")
		return c != 80 && c >= 10 && r >= 2
	})
	cols, rows := tt.Size("planner:0")
	waitJS(t, ctx, "xterm at the run's size", fmt.Sprintf(`document.querySelectorAll('#d-term .xterm-rows > div').length === %d`, rows))
	t.Logf("the page's terminal is %dx%d", cols, rows)

	// A line typed into the page reaches the program, and its answer the page.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#d-term .xterm-screen`))); err != nil {
		t.Fatal(err)
	}
	// Shift+PageUp shows the scrollback: the history is there.
	for range 3 {
		if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.PageUp, chromedp.KeyModifiers(chromedp.ModifierShift))); err != nil {
			t.Fatal(err)
		}
	}
	waitJS(t, ctx, "the history in the scrollback", termRows+`.includes('history line 0history line 1')`)
	typeKeys(t, ctx, "hello world\r")
	t.Cleanup(func() {
		if t.Failed() {
			rows, _ := chromedp.Run(ctx, chromedp.Evaluate[string](termRows))
			active, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.activeElement?.className || ''`))
			t.Logf("typed %q; the page's terminal shows %q; focus on %q", tt.Typed("planner:0"), rows, active)
		}
	})
	waitJS(t, ctx, "the program's answer on the page", termRows+`.includes('you said: hello world')`)
	if got := string(tt.Typed("planner:0")); got != "hello world\r" {
		t.Errorf("the program was typed %q", got)
	}
	// Escape in the terminal is the program's, not the panel's.
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Escape)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "Escape typed into the run", func() bool { return strings.HasSuffix(string(tt.Typed("planner:0")), "\x1b") })
	if open, _ := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.getElementById('details').hidden`)); !open {
		t.Error("Escape in the terminal closed the panel")
	}

	shots := t.TempDir()
	screenshot(t, ctx, shots, "dashboard-terminal.png")

	// The instance ends; the last screen stays. Its next run is attached
	// again (the page polls the status), and takes input.
	tt.End("planner:0", program.StateExited, program.LifecycleDone, "exited 0", "[tend] planner:0 exited: exit 0 (clean_exit)")
	waitJS(t, ctx, "the end shown", `document.getElementById('d-term-state').textContent === 'ended (done)'`)
	waitJS(t, ctx, "the last screen kept", termRows+`.includes('you said: hello world')`)
	tt.AddTTY("planner:0", 80, 24)
	st, _ := b.Status("planner:0", nil)
	ev.Publish(program.KindStatusChanged, "planner:0", st[0])
	waitJS(t, ctx, "the next run attached", `document.getElementById('d-term-state').textContent === 'live'`)
	typeKeys(t, ctx, "again\r")
	waitJS(t, ctx, "the next run's answer", termRows+`.includes('you said: again')`)

	for _, u := range requests() {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "data" && p.Host != l.Addr().String()) {
			t.Errorf("the page requested %s, outside the server", u)
		}
	}
	for _, p := range problems() {
		t.Errorf("page console: %s", p)
	}
}

// typeKeys types s into the focused element as a keyboard does: one
// keyDown with its text per character, as Chrome's own keys and
// Puppeteer's keyboard send them. (chromedp's SendKeys adds a char event
// after each keyDown, which xterm.js takes as a second key.)
func typeKeys(t *testing.T, ctx context.Context, s string) {
	t.Helper()
	for _, r := range s {
		down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: string(r), Text: string(r), UnmodifiedText: string(r)}
		if r == '\r' {
			down.Key, down.Code, down.WindowsVirtualKeyCode, down.NativeVirtualKeyCode = "Enter", "Enter", 13, 13
		}
		up := down
		up.Type, up.Text, up.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
		for _, ev := range []input.DispatchKeyEventParams{down, up} {
			if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// replConfig is a real daemon's fleet with a terminal agent: python3's
// REPL; %d is the HTTP port.
const replConfig = `[daemon]
http = "127.0.0.1:%d"

[defaults]
stop_grace = "2s"

[program.repl]
command = ["python3", "-i", "-q"]
tty = true
agent = true
`

// TestDashboardTerminalRealDaemon: against the real tend binary, logged in
// over TCP as a browser is (the WebSocket then rides the session cookie
// and the page's Origin, and proves the page in its first message), a line typed into the page's terminal reaches
// python3 and its answer comes back onto the page.
func TestDashboardTerminalRealDaemon(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		testutil.Missing(t, "no browser at %s (CI installs Debian's chromium package: apt-get install chromium)", chromiumPath)
	}
	if testing.Short() {
		t.Skip("builds tend and starts a browser")
	}
	d, out := startTendWith(t, replConfig, []string{"repl:0"})
	if d == nil {
		if strings.Contains(out, "tty") {
			t.Skipf("this daemon has no terminals yet (the core of terminal agents has not landed):\n%s", out)
		}
		t.Fatalf("tend up ended:\n%s", out)
	}
	code := d.loginCode(t)
	ctx, requests, problems := newBrowser(t)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(d.base+"/login"),
		chromedp.SendKeys(`input[name=code]`, code+kb.Enter),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the row of repl:0", `!!document.querySelector('#rows [data-id="repl:0"]')`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#rows [data-id="repl:0"] .c-id`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "python's prompt in the page", `document.getElementById('d-term-state').textContent === 'live' && `+termRows+`.includes('>>>')`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#d-term .xterm-screen`))); err != nil {
		t.Fatal(err)
	}
	typeKeys(t, ctx, "print(6 * 7)\r")
	waitJS(t, ctx, "python's answer on the page", termRows+`.includes('42')`)
	scr, err := d.client.Screen("repl:0", false)
	if err != nil || !strings.Contains(strings.Join(scr.Lines, "\n"), ">>> print(6 * 7)\n42") {
		t.Errorf("the run's screen: %q, %v", scr.Lines, err)
	}
	screenshot(t, ctx, t.TempDir(), "dashboard-terminal-repl.png")
	for _, u := range requests() {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "data" && p.Host != d.addr) {
			t.Errorf("the page requested %s, outside the daemon at %s", u, d.addr)
		}
	}
	for _, p := range problems() {
		t.Errorf("page console: %s", p)
	}
}
